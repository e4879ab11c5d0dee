//go:build rdma && cgo

#include "xverbs.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

// XV_CHUNK bounds the work requests chained on the C stack per post, and
// the completions polled per call to the provider.
#define XV_CHUNK 16

// xv_post_send posts n work requests chained, in one ibv_post_send: a
// batch's requests cost one doorbell. Up to XV_CHUNK are converted on the
// stack, more in memory allocated for the call.
int xv_post_send(struct ibv_qp *qp, const xv_wr *wrs, int n, int *bad) {
	struct ibv_send_wr swr[XV_CHUNK];
	struct ibv_sge ssge[XV_CHUNK];
	struct ibv_send_wr *wr = swr;
	struct ibv_sge *sge = ssge;
	*bad = -1;
	if (n <= 0)
		return 0;
	if (n > XV_CHUNK) {
		wr = calloc((size_t)n, sizeof *wr);
		sge = calloc((size_t)n, sizeof *sge);
		if (!wr || !sge) {
			free(wr);
			free(sge);
			*bad = 0;
			return ENOMEM;
		}
	} else {
		memset(wr, 0, sizeof(wr[0]) * n);
	}
	int rc = 0;
	for (int i = 0; i < n; i++) {
		const xv_wr *w = &wrs[i];
		sge[i].addr = w->addr;
		sge[i].length = w->len;
		sge[i].lkey = w->lkey;
		wr[i].wr_id = w->id;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = w->len > 0 ? 1 : 0;
		switch (w->op) {
		case XV_OP_SEND:
			wr[i].opcode = (w->flags & XV_IMM) ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
			break;
		case XV_OP_WRITE:
			wr[i].opcode = IBV_WR_RDMA_WRITE;
			break;
		case XV_OP_READ:
			wr[i].opcode = IBV_WR_RDMA_READ;
			break;
		default:
			*bad = i;
			rc = EINVAL;
			goto out;
		}
		if (w->flags & XV_IMM)
			wr[i].imm_data = htonl(w->imm);
		if (w->flags & XV_SIGNALED)
			wr[i].send_flags |= IBV_SEND_SIGNALED;
		if (w->flags & XV_INLINE)
			wr[i].send_flags |= IBV_SEND_INLINE;
		wr[i].wr.rdma.remote_addr = w->raddr;
		wr[i].wr.rdma.rkey = w->rkey;
	}
	struct ibv_send_wr *badwr = NULL;
	rc = ibv_post_send(qp, wr, &badwr);
	if (rc)
		*bad = badwr ? (int)(badwr - wr) : 0;
out:
	if (wr != swr) {
		free(wr);
		free(sge);
	}
	return rc;
}

int xv_post_recv(struct ibv_qp *qp, uint64_t id, uint64_t addr, uint32_t len, uint32_t lkey) {
	struct ibv_sge sge = {.addr = addr, .length = len, .lkey = lkey};
	struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = len > 0 ? 1 : 0};
	struct ibv_recv_wr *bad = NULL;
	return ibv_post_recv(qp, &wr, &bad);
}

int xv_poll(struct ibv_cq *cq, xv_wc *out, int n) {
	struct ibv_wc wc[XV_CHUNK];
	int got = 0;
	while (got < n) {
		int want = n - got < XV_CHUNK ? n - got : XV_CHUNK;
		int k = ibv_poll_cq(cq, want, wc);
		if (k < 0)
			return got > 0 ? got : -EIO;
		for (int i = 0; i < k; i++) {
			xv_wc *o = &out[got + i];
			o->id = wc[i].wr_id;
			o->status = wc[i].status;
			o->opcode = wc[i].opcode;
			o->len = wc[i].byte_len;
			o->flags = wc[i].wc_flags;
			o->imm = (wc[i].wc_flags & IBV_WC_WITH_IMM) ? ntohl(wc[i].imm_data) : 0;
			o->qp_num = wc[i].qp_num;
			o->vendor_err = wc[i].vendor_err;
		}
		got += k;
		if (k < want)
			break;
	}
	return got;
}

// xv_wait waits up to timeout_ms for the completion channel or the wake
// eventfd, takes and acknowledges the channel's events and drains the
// eventfd. It takes no completion. It returns 0, or a negative errno.
int xv_wait(struct ibv_comp_channel *ch, int wakefd, int timeout_ms) {
	struct pollfd p[2] = {{.fd = ch->fd, .events = POLLIN}, {.fd = wakefd, .events = POLLIN}};
	int r = poll(p, 2, timeout_ms);
	if (r < 0)
		return errno == EINTR ? 0 : -errno;
	if (p[0].revents & POLLIN) {
		struct ibv_cq *ecq;
		void *ectx;
		while (ibv_get_cq_event(ch, &ecq, &ectx) == 0)
			ibv_ack_cq_events(ecq, 1);
	}
	if (p[1].revents & POLLIN) {
		uint64_t v;
		while (read(wakefd, &v, sizeof v) == sizeof v) {
		}
	}
	return 0;
}

int xv_set_nonblock(int fd) {
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return errno;
	return 0;
}

struct ibv_mr *xv_reg_mr(struct ibv_pd *pd, uintptr_t addr, size_t len) {
	return ibv_reg_mr(pd, (void *)addr, len,
			  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
}

int xv_query_port(struct ibv_context *ctx, int port, xv_port *out) {
	struct ibv_port_attr a;
	memset(&a, 0, sizeof a);
	int rc = ibv_query_port(ctx, (uint8_t)port, &a);
	if (rc)
		return rc;
	out->state = a.state;
	out->link_layer = a.link_layer;
	out->active_mtu = a.active_mtu;
	out->active_speed = a.active_speed;
	out->active_width = a.active_width;
	out->gid_tbl_len = a.gid_tbl_len;
	return 0;
}

// xv_query_gids stores the non-zero GIDs of a port (16 bytes each) and
// their indexes, at most max, and returns how many.
int xv_query_gids(struct ibv_context *ctx, int port, int tbl_len, uint8_t *gids, int32_t *idx, int max) {
	static const uint8_t zero[16];
	int k = 0;
	for (int i = 0; i < tbl_len && k < max; i++) {
		union ibv_gid g;
		if (ibv_query_gid(ctx, (uint8_t)port, i, &g))
			continue;
		if (memcmp(g.raw, zero, 16) == 0)
			continue;
		memcpy(gids + 16 * k, g.raw, 16);
		idx[k] = i;
		k++;
	}
	return k;
}

uint64_t xv_node_guid(struct ibv_device *dev) { return be64toh(ibv_get_device_guid(dev)); }

int xv_qp_error(struct ibv_qp *qp) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_ERR;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

int xv_create_id(struct rdma_event_channel *ch, uintptr_t handle, struct rdma_cm_id **out) {
	if (rdma_create_id(ch, out, (void *)handle, RDMA_PS_TCP))
		return errno;
	return 0;
}

void xv_set_handle(struct rdma_cm_id *id, uintptr_t handle) { id->context = (void *)handle; }

static socklen_t xv_sockaddr(struct sockaddr_storage *ss, int family, const uint8_t *ip, int port) {
	memset(ss, 0, sizeof *ss);
	if (family == AF_INET6) {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)ss;
		s->sin6_family = AF_INET6;
		s->sin6_port = htons((uint16_t)port);
		memcpy(&s->sin6_addr, ip, 16);
		return sizeof *s;
	}
	struct sockaddr_in *s = (struct sockaddr_in *)ss;
	s->sin_family = AF_INET;
	s->sin_port = htons((uint16_t)port);
	memcpy(&s->sin_addr, ip, 4);
	return sizeof *s;
}

int xv_bind(struct rdma_cm_id *id, int family, const uint8_t *ip, int port) {
	struct sockaddr_storage ss;
	xv_sockaddr(&ss, family, ip, port);
	if (rdma_bind_addr(id, (struct sockaddr *)&ss))
		return errno;
	return 0;
}

int xv_resolve_addr(struct rdma_cm_id *id, int family, const uint8_t *ip, int port, int timeout_ms) {
	struct sockaddr_storage ss;
	xv_sockaddr(&ss, family, ip, port);
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&ss, timeout_ms))
		return errno;
	return 0;
}

int xv_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_cq *cq,
		 int send_depth, int recv_depth, int max_inline) {
	struct ibv_qp_init_attr a;
	memset(&a, 0, sizeof a);
	a.send_cq = cq;
	a.recv_cq = cq;
	a.qp_type = IBV_QPT_RC;
	a.sq_sig_all = 0;
	a.cap.max_send_wr = send_depth;
	a.cap.max_recv_wr = recv_depth;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	a.cap.max_inline_data = max_inline;
	if (rdma_create_qp(id, pd, &a))
		return errno;
	return 0;
}

static void xv_conn_param(struct rdma_conn_param *p, const uint8_t *priv, int len, int resp_res, int init_depth) {
	memset(p, 0, sizeof *p);
	p->private_data = priv;
	p->private_data_len = (uint8_t)len;
	p->responder_resources = (uint8_t)resp_res;
	p->initiator_depth = (uint8_t)init_depth;
	p->retry_count = 7;
	// No receiver-not-ready retries: a SEND without a posted receive is a
	// protocol error and should fail at once, not stall.
	p->rnr_retry_count = 0;
}

int xv_connect(struct rdma_cm_id *id, const uint8_t *priv, int len, int resp_res, int init_depth) {
	struct rdma_conn_param p;
	xv_conn_param(&p, priv, len, resp_res, init_depth);
	if (rdma_connect(id, &p))
		return errno;
	return 0;
}

int xv_accept(struct rdma_cm_id *id, const uint8_t *priv, int len, int resp_res, int init_depth) {
	struct rdma_conn_param p;
	xv_conn_param(&p, priv, len, resp_res, init_depth);
	if (rdma_accept(id, &p))
		return errno;
	return 0;
}

// xv_get_event takes one event without blocking (the channel's fd is
// non-blocking), copies what the Go side needs and acknowledges it at once,
// so that rdma_destroy_id never waits on an event held elsewhere. It
// returns 0, or an errno (EAGAIN: none pending).
int xv_get_event(struct rdma_event_channel *ch, xv_cm_event *out) {
	struct rdma_cm_event *ev;
	while (rdma_get_cm_event(ch, &ev)) {
		if (errno != EINTR)
			return errno;
	}
	memset(out, 0, sizeof *out);
	out->event = ev->event;
	out->status = ev->status;
	out->id = ev->id;
	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
		out->handle = (uintptr_t)ev->listen_id->context;
	else
		out->handle = (uintptr_t)ev->id->context;
	const struct rdma_conn_param *c = &ev->param.conn;
	if (c->private_data && c->private_data_len > 0) {
		int n = c->private_data_len;
		out->private_len = n;
		if (n > (int)sizeof out->private_data)
			n = sizeof out->private_data;
		memcpy(out->private_data, c->private_data, n);
	}
	rdma_ack_cm_event(ev);
	return 0;
}

int xv_src_port(struct rdma_cm_id *id) { return ntohs(rdma_get_src_port(id)); }
