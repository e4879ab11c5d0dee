// Package doubling is the partner schedule of recursive doubling, shared by
// the allreduce of package comm and the small allreduce of the TCP
// communicator, which folds on receive over the same pairing.
package doubling
