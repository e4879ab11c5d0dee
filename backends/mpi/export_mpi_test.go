//go:build mpi

package mpi

// ProcsText exposes procsText to the external tests.
var ProcsText = procsText
