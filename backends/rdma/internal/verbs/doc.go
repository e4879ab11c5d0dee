// Package verbs is the real fabric.Provider: RDMA devices through
// rdma-core's libibverbs (memory registration, completion queues, reliable
// connected queue pairs) and librdmacm (connections by IP address and port),
// called through cgo.
//
//	p := verbs.Provider()
//	devs, err := p.Devices()     // xpu info
//	c, err := p.Open("", 4096)   // first device with an active port
//	defer c.Close()
//
// # Building
//
// The cgo code is behind the build tag rdma, so that the module builds and
// its tests run on machines without rdma-core:
//
//	go build -tags rdma ./...   // needs libibverbs-dev and librdmacm-dev
//
// Built without the tag, or without cgo, the package has the same API and
// every entry point fails with ErrNotBuilt, which matches
// xerr.ErrUnavailable. Built with it, a machine without RDMA devices (or
// without kernel support) answers ErrNoDevice, which matches it too. Built
// tells which build this is.
//
// # Devices and contexts
//
// A Context is opened on one of the ibv_contexts that the connection
// manager itself uses (rdma_get_devices), so that the connection manager's
// queue pairs and the Context's protection domain and completion queue
// belong to the same device context. It has one protection domain, one
// completion queue shared by the send and receive queues of every endpoint
// (size it for all of them: an overflow breaks the queue), a completion
// channel for Wait, and one connection-manager event channel read by one
// goroutine per Context, which routes the events of listeners, dials and
// endpoints. Wait blocks in the kernel (poll(2) on the completion channel
// and an eventfd that Wake writes), holding an OS thread while it waits.
//
// # Connections
//
// Listen and Dial take "ip:port" of an address of an RDMA netdev (RoCE: the
// Ethernet interface's address; InfiniBand: the IPoIB address); the address
// must reach the Context's device. Private data is carried with a length
// byte in front, so Request.Private and the reply Dial returns are exactly
// the bytes the peer gave (the connection manager pads private data to a
// fixed size on InfiniBand and RoCE); at most fabric.MaxPrivate bytes.
//
// A Request is answered once, by Accept or Reject; Listener.Close rejects
// the requests Accept has not returned yet, and Context.Close those
// returned but never answered.
//
// Endpoints are RC queue pairs with one scatter-gather piece per request,
// retry count 7 and no receiver-not-ready retries (rnr_retry 0): a SEND that
// finds no posted receive fails at once with an error matching
// fabric.ErrRemote. RDMA READ is enabled both ways at the device's maximum
// depth.
//
// An endpoint's Lost closes when the peer disconnects or its process dies
// (the kernel disconnects its queue pairs; Err matches xerr.ErrPeerLost),
// when a request of the endpoint fails with an error other than a flush
// (Err is that completion's error), on Fail (xerr.ErrPeerLost), on Close
// (xerr.ErrClosed) and when the device goes away (xerr.ErrDeviceLost). The
// queue pair is then moved to the error state and disconnected, so that its
// outstanding requests flush and the peer sees it lost too.
//
// # Completions
//
// A failed completion carries the hardware's status (ibv_wc_status_str)
// and matches fabric.ErrFlushed (IBV_WC_WR_FLUSH_ERR), fabric.ErrRemote
// (retries exceeded, remote access, operation or invalid request errors)
// or fabric.ErrLocal (the rest). The hardware does not say which operation
// a failed request was: Op of a failed completion is 0; identify it by its
// ID.
//
// Close of an endpoint disconnects it and destroys its queue pair: when it
// returns, the endpoint's requests no longer touch memory. Completions of
// requests still outstanding then may or may not be reported (providers
// differ: some drop a destroyed queue pair's entries); a caller that needs
// every completion calls Fail and polls until it has them, then Close.
//
// # Memory
//
// Register pins [p, p+n) (ibv_reg_mr with local write, remote read and
// remote write). The memory must stay valid until Deregister and must not
// be Go heap memory that the garbage collector may free: allocate it off
// the heap. Context.Close deregisters what is still registered.
package verbs
