package xpu

// Unregister removes a driver; for tests of the registry only.
var Unregister = unregister
