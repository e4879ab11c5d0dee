// The C half of package verbs: small functions that do in one crossing
// what would otherwise take many (building a chain of work requests,
// polling a batch of completions, arming and waiting), and wrappers of the
// verbs that rdma-core defines as static inline functions or macros, which
// cgo cannot call.
//
// Nothing here keeps a pointer it was given after it returns: the Go side
// passes arrays of the plain structs below, often on its own stack.

#ifndef XPU_VERBS_H
#define XPU_VERBS_H

#include <stdint.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

// Operations and flags of xv_wr.
enum {
	XV_OP_SEND = 1,
	XV_OP_WRITE = 2,
	XV_OP_READ = 3,
};

enum {
	XV_SIGNALED = 1,
	XV_INLINE = 2,
	XV_IMM = 4,
};

// xv_wr is one send-queue work request with a single scatter-gather piece.
typedef struct {
	uint64_t id;
	uint64_t addr;  // local address
	uint64_t raddr; // remote address (write, read)
	uint32_t len;
	uint32_t lkey;
	uint32_t rkey;
	uint32_t imm;   // host byte order
	uint8_t op;     // XV_OP_*
	uint8_t flags;  // XV_SIGNALED | XV_INLINE | XV_IMM
	uint8_t pad[6];
} xv_wr;

// xv_wc is a completion, flattened.
typedef struct {
	uint64_t id;
	uint32_t status;
	uint32_t opcode;
	uint32_t len;
	uint32_t imm;   // host byte order, valid when flags has IBV_WC_WITH_IMM
	uint32_t flags;
	uint32_t qp_num;
	uint32_t vendor_err;
	uint32_t pad;
} xv_wc;

// xv_cm_event is a connection-manager event, copied out and acknowledged.
typedef struct {
	int32_t event;
	int32_t status;
	uintptr_t handle;        // our handle of the id (of the listener for a request)
	struct rdma_cm_id *id;   // the id (the new one for a connection request)
	uint32_t private_len;    // bytes the event carried (may be padded)
	uint8_t private_data[64];
} xv_cm_event;

// xv_port is what Devices reports of a port.
typedef struct {
	int32_t state;
	int32_t link_layer;
	int32_t active_mtu;
	int32_t active_speed;
	int32_t active_width;
	int32_t gid_tbl_len;
} xv_port;

int xv_post_send(struct ibv_qp *qp, const xv_wr *wrs, int n, int *bad);
int xv_post_recv(struct ibv_qp *qp, uint64_t id, uint64_t addr, uint32_t len, uint32_t lkey);
int xv_poll(struct ibv_cq *cq, xv_wc *out, int n);
int xv_wait(struct ibv_comp_channel *ch, int wakefd, int timeout_ms);
int xv_set_nonblock(int fd);

struct ibv_mr *xv_reg_mr(struct ibv_pd *pd, uintptr_t addr, size_t len);
int xv_query_port(struct ibv_context *ctx, int port, xv_port *out);
int xv_query_gids(struct ibv_context *ctx, int port, int tbl_len, uint8_t *gids, int32_t *idx, int max);
uint64_t xv_node_guid(struct ibv_device *dev);
int xv_qp_error(struct ibv_qp *qp);

int xv_create_id(struct rdma_event_channel *ch, uintptr_t handle, struct rdma_cm_id **out);
void xv_set_handle(struct rdma_cm_id *id, uintptr_t handle);
int xv_bind(struct rdma_cm_id *id, int family, const uint8_t *ip, int port);
int xv_resolve_addr(struct rdma_cm_id *id, int family, const uint8_t *ip, int port, int timeout_ms);
int xv_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_cq *cq,
		 int send_depth, int recv_depth, int max_inline);
int xv_connect(struct rdma_cm_id *id, const uint8_t *priv, int len, int resp_res, int init_depth);
int xv_accept(struct rdma_cm_id *id, const uint8_t *priv, int len, int resp_res, int init_depth);
int xv_get_event(struct rdma_event_channel *ch, xv_cm_event *out);
int xv_src_port(struct rdma_cm_id *id);

#endif
