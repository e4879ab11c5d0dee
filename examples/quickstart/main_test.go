package main

// The program of the README, run as a test so the README cannot rot.
func Example() {
	main()
	// Output: 2 <nil> <nil>
}
