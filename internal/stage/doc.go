// Package stage holds what the communicators share to stage a block the
// host cannot touch (device memory) through host memory: where the host
// stand-in lives (Space), how it is allocated (Alloc, Heap) and freed
// (Free). Package comm stages the blocking calls and the nonblocking
// package functions with it (docs/adr/0021, 0042), and procs the device
// messages it moves itself (docs/adr/0041).
package stage
