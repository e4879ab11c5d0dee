/*
 * fakecuda streams and events: each stream is an ordered queue served by
 * a pthread of its own; events carry a recorded and a completed
 * generation.
 */
#include "fakecuda.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

/* ---- reference counting ---- */

void fc_event_unref(fc_event *e)
{
	if (e && --e->refs == 0)
		free(e);
}

void fc_stream_unref(fc_stream *s)
{
	if (s && --s->refs == 0) {
		pthread_cond_destroy(&s->wcv);
		free(s);
	}
}

void fc_free_op(fc_op *op)
{
	free(op->staging);
	fc_event_unref(op->ev);
	free(op);
}

/* ---- lookups (G.mu held) ---- */

static fc_stream *stream_find(CUstream hs)
{
	for (fc_stream *s = G.streams; s; s = s->next)
		if (s == hs)
			return s;
	return NULL;
}

static fc_event *event_find(CUevent he)
{
	for (fc_event *e = G.events; e; e = e->next)
		if (e == he)
			return e;
	return NULL;
}

/* The start of the entry points on one event: fc_enter, G.mu, and the
 * live event he in *out. On success G.mu is held; on failure it is not. */
static CUresult event_enter(CUevent he, fc_event **out)
{
	CUresult r = fc_enter();
	if (r)
		return r;
	fc_lock();
	*out = event_find(he);
	if (!*out) {
		fc_unlock();
		return CUDA_ERROR_INVALID_HANDLE;
	}
	return CUDA_SUCCESS;
}

/* A new record or wait (kind) on e, holding a reference to e, for the
 * caller to give a generation and submit; NULL when out of memory. */
static fc_op *event_op(int kind, fc_event *e)
{
	fc_op *op = calloc(1, sizeof *op);
	if (op) {
		op->kind = kind;
		op->ev = e;
		e->refs++;
	}
	return op;
}

/* The stream an enqueueing call names, which must belong to the current
 * context c. NULL stands for the legacy default stream (*out = NULL).
 * The caller owns a reference to *out (fc_stream_unref). */
CUresult fc_stream_get(CUstream hs, fc_ctx *c, fc_stream **out)
{
	*out = NULL;
	if (!hs)
		return CUDA_SUCCESS;
	fc_stream *s = stream_find(hs);
	if (!s || s->ctx != c || s->ctxgen != c->gen)
		return CUDA_ERROR_INVALID_HANDLE;
	s->refs++;
	*out = s;
	return CUDA_SUCCESS;
}

/* Appends op to s's queue; on failure frees op. G.mu held. */
CUresult fc_submit(fc_stream *s, fc_ctx *c, fc_op *op)
{
	(void)c;
	if (s->dead) {
		fc_free_op(op);
		return CUDA_ERROR_INVALID_HANDLE;
	}
	CUresult r = fc_ctx_state(s->ctx, s->ctxgen);
	if (r) {
		fc_free_op(op);
		return r;
	}
	op->next = NULL;
	if (s->tail)
		s->tail->next = op;
	else
		s->head = op;
	s->tail = op;
	pthread_cond_signal(&s->wcv);
	return CUDA_SUCCESS;
}

/* ---- the worker ---- */

/* Executes one operation of s. G.mu held; dropped while copying or
 * running a kernel. Returns the fault, if any. */
static CUresult run_op(fc_stream *s, fc_op *op)
{
	CUresult r = CUDA_SUCCESS;
	switch (op->kind) {
	case OP_RECORD: {
		fc_event *e = op->ev;
		if (op->gen > e->completed) {
			e->completed = op->gen;
			fc_now(&e->ts);
		}
		return CUDA_SUCCESS;
	}
	case OP_WAIT: {
		fc_event *e = op->ev;
		for (;;) {
			if (e->completed >= op->gen)
				return CUDA_SUCCESS;
			r = fc_ctx_state(s->ctx, s->ctxgen);
			if (r)
				return r;
			CUresult er = fc_ctx_state(e->ctx, e->ctxgen);
			if (er) {
				/* The record waited for will never complete:
				 * fail this context too rather than hang or run
				 * later work on data that never arrived. */
				if (er != CUDA_ERROR_ILLEGAL_ADDRESS && er != CUDA_ERROR_LAUNCH_FAILED)
					er = CUDA_ERROR_LAUNCH_FAILED;
				fc_set_sticky(s->ctx, s->ctxgen, er);
				return er;
			}
			fc_wait();
		}
	}
	case OP_COPY:
		fc_unlock();
		r = fc_exec_copy(op, s->ctx, s->ctxgen);
		fc_lock();
		if (!r)
			G.n_async_copies++;
		break;
	case OP_MEMSET:
		fc_unlock();
		r = fc_exec_memset(op, s->ctx, s->ctxgen);
		fc_lock();
		break;
	case OP_KERNEL:
		fc_unlock();
		r = fc_run_kernel(op, s->ctx, s->ctxgen);
		fc_lock();
		break;
	default:
		break;
	}
	if (r)
		fc_set_sticky(s->ctx, s->ctxgen, r);
	return r;
}

static void *worker(void *arg)
{
	fc_stream *s = arg;
	fc_tls_worker = 1;
	fc_lock();
	for (;;) {
		while (!s->head && !s->stop)
			pthread_cond_wait(&s->wcv, &G.mu);
		if (!s->head)
			break;
		fc_op *op = s->head;
		s->head = op->next;
		if (!s->head)
			s->tail = NULL;
		s->running = 1;
		/* after a fault, a reset or a device loss, work is dropped */
		CUresult r = fc_ctx_state(s->ctx, s->ctxgen);
		if (!r)
			r = run_op(s, op);
		if (op->w) {
			op->w->res = r;
			op->w->done = 1;
		}
		s->running = 0;
		fc_free_op(op);
		fc_wake_all();
	}
	fc_unlock();
	return NULL;
}

/* ---- streams ---- */

/* What cuStreamCreate and cuEventCreate check and allocate after
 * fc_enter_ctx: a result pointer out, no flags outside mask, and a zeroed
 * object of size bytes in *obj. G.mu held. */
static CUresult new_handle(const void *out, unsigned flags, unsigned mask, size_t size, void **obj)
{
	if (!out || (flags & ~mask))
		return CUDA_ERROR_INVALID_VALUE;
	*obj = calloc(1, size);
	return *obj ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

API CUresult cuStreamCreate(CUstream *ph, unsigned flags)
{
	fc_ctx *c;
	CUresult r = fc_enter_ctx(&c);
	if (r)
		return r;
	void *obj;
	r = new_handle(ph, flags, 1u, sizeof(fc_stream), &obj);
	if (r)
		goto out;
	fc_stream *s = obj;
	s->ctx = c;
	s->ctxgen = c->gen;
	s->flags = flags;
	s->refs = 1;
	pthread_cond_init(&s->wcv, NULL);
	/* the worker takes no asynchronous signals */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int e = pthread_create(&s->thr, NULL, worker, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e) {
		pthread_cond_destroy(&s->wcv);
		free(s);
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	s->next = G.streams;
	G.streams = s;
	G.n_streams++;
	*ph = s;
out:
	fc_unlock();
	return r;
}

/* Unlinks s, lets its queue drain (or be dropped), stops and joins its
 * worker. G.mu held; dropped while joining. */
static void stream_teardown(fc_stream *s)
{
	for (fc_stream **pp = &G.streams; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	s->dead = 1;
	G.n_streams--;
	while (s->head || s->running)
		fc_wait();
	s->stop = 1;
	pthread_cond_signal(&s->wcv);
	fc_unlock();
	pthread_join(s->thr, NULL);
	fc_lock();
	fc_stream_unref(s);
}

void fc_destroy_ctx_streams(fc_ctx *c, unsigned gen)
{
again:
	for (fc_stream *s = G.streams; s; s = s->next)
		if (s->ctx == c && s->ctxgen == gen) {
			G.n_leaked++;
			stream_teardown(s);
			goto again;
		}
}

/* Destroys the stream even when its context has failed, and then
 * reports the failure. */
API CUresult cuStreamDestroy_v2(CUstream hs)
{
	CUresult r = fc_enter();
	if (r)
		return r;
	fc_lock();
	fc_stream *s = stream_find(hs);
	if (!s) {
		fc_unlock();
		return CUDA_ERROR_INVALID_HANDLE;
	}
	fc_ctx *c = s->ctx;
	unsigned gen = s->ctxgen;
	stream_teardown(s);
	r = fc_ctx_state(c, gen);
	fc_unlock();
	return r;
}

/* The stream of a synchronizing call: a live stream, or the legacy
 * stream of the current context. G.mu held. */
static CUresult sync_target(CUstream hs, fc_stream **out)
{
	*out = NULL;
	if (!hs) {
		fc_ctx *c;
		return fc_cur_ctx(&c);
	}
	fc_stream *s = stream_find(hs);
	if (!s)
		return CUDA_ERROR_INVALID_HANDLE;
	*out = s;
	return CUDA_SUCCESS;
}

API CUresult cuStreamSynchronize(CUstream hs)
{
	CUresult r = fc_enter();
	if (r)
		return r;
	fc_lock();
	fc_stream *s;
	r = sync_target(hs, &s);
	if (r || !s) {
		fc_unlock();
		return r;
	}
	s->refs++;
	for (;;) {
		r = fc_ctx_state(s->ctx, s->ctxgen);
		if (r || (!s->head && !s->running))
			break;
		fc_wait();
	}
	fc_stream_unref(s);
	fc_unlock();
	return r;
}

API CUresult cuStreamQuery(CUstream hs)
{
	CUresult r = fc_enter();
	if (r)
		return r;
	fc_lock();
	fc_stream *s;
	r = sync_target(hs, &s);
	if (!r && s) {
		r = fc_ctx_state(s->ctx, s->ctxgen);
		if (!r && (s->head || s->running))
			r = CUDA_ERROR_NOT_READY;
	}
	fc_unlock();
	return r;
}

/* ---- events ---- */

API CUresult cuEventCreate(CUevent *pe, unsigned flags)
{
	fc_ctx *c;
	CUresult r = fc_enter_ctx(&c);
	if (r)
		return r;
	void *obj;
	r = new_handle(pe, flags, 3u, sizeof(fc_event), &obj);
	if (r)
		goto out;
	fc_event *e = obj;
	e->flags = flags;
	e->ctx = c;
	e->ctxgen = c->gen;
	e->refs = 1;
	e->next = G.events;
	G.events = e;
	G.n_events++;
	*pe = e;
out:
	fc_unlock();
	return r;
}

/* Destroys the event even when its context has failed (then reporting
 * the failure); records still queued keep it alive until they ran. */
API CUresult cuEventDestroy_v2(CUevent he)
{
	fc_event *e;
	CUresult r = event_enter(he, &e);
	if (r)
		return r;
	for (fc_event **pp = &G.events; *pp; pp = &(*pp)->next)
		if (*pp == e) {
			*pp = e->next;
			break;
		}
	e->dead = 1;
	G.n_events--;
	r = fc_ctx_state(e->ctx, e->ctxgen);
	fc_event_unref(e);
	fc_unlock();
	return r;
}

API CUresult cuEventRecord(CUevent he, CUstream hs)
{
	fc_event *e;
	CUresult r = event_enter(he, &e);
	if (r)
		return r;
	if (!hs) {
		/* legacy stream: everything before is done; complete now */
		fc_ctx *c;
		r = fc_cur_ctx(&c);
		if (r)
			goto out;
		if (e->ctx != c || e->ctxgen != c->gen) {
			r = CUDA_ERROR_INVALID_HANDLE;
			goto out;
		}
		e->ever_recorded = 1;
		e->completed = ++e->recorded;
		fc_now(&e->ts);
		fc_wake_all();
		goto out;
	}
	fc_stream *s = stream_find(hs);
	if (!s || s->ctx != e->ctx || s->ctxgen != e->ctxgen) {
		r = CUDA_ERROR_INVALID_HANDLE;
		goto out;
	}
	r = fc_ctx_state(s->ctx, s->ctxgen);
	if (r)
		goto out;
	fc_op *op = event_op(OP_RECORD, e);
	if (!op) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	op->gen = ++e->recorded;
	e->ever_recorded = 1;
	r = fc_submit(s, NULL, op);
out:
	fc_unlock();
	return r;
}

API CUresult cuEventQuery(CUevent he)
{
	fc_event *e;
	CUresult r = event_enter(he, &e);
	if (r)
		return r;
	r = fc_ctx_state(e->ctx, e->ctxgen);
	if (!r && e->completed < e->recorded)
		r = CUDA_ERROR_NOT_READY;
	fc_unlock();
	return r;
}

/* Waits until e completes the record current at the call, or its context
 * fails. G.mu held. */
static CUresult event_wait(fc_event *e)
{
	uint64_t target = e->recorded;
	CUresult r;
	e->refs++;
	for (;;) {
		r = fc_ctx_state(e->ctx, e->ctxgen);
		if (r || e->completed >= target)
			break;
		fc_wait();
	}
	fc_event_unref(e);
	return r;
}

API CUresult cuEventSynchronize(CUevent he)
{
	fc_event *e;
	CUresult r = event_enter(he, &e);
	if (r)
		return r;
	r = event_wait(e);
	fc_unlock();
	return r;
}

API CUresult cuEventElapsedTime(float *ms, CUevent hstart, CUevent hend)
{
	CUresult r = fc_enter();
	if (r)
		return r;
	fc_lock();
	fc_event *a = event_find(hstart), *b = event_find(hend);
	if (!a || !b) {
		r = CUDA_ERROR_INVALID_HANDLE;
		goto out;
	}
	if (!ms) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	r = fc_ctx_state(a->ctx, a->ctxgen);
	if (!r)
		r = fc_ctx_state(b->ctx, b->ctxgen);
	if (r)
		goto out;
	if ((a->flags & 2) || (b->flags & 2) || !a->ever_recorded || !b->ever_recorded) {
		r = CUDA_ERROR_INVALID_HANDLE;
		goto out;
	}
	if (a->completed < a->recorded || b->completed < b->recorded) {
		r = CUDA_ERROR_NOT_READY;
		goto out;
	}
	double ns = (double)(b->ts.tv_sec - a->ts.tv_sec) * 1e9 + (double)(b->ts.tv_nsec - a->ts.tv_nsec);
	*ms = (float)(ns / 1e6);
out:
	fc_unlock();
	return r;
}

API CUresult cuStreamWaitEvent(CUstream hs, CUevent he, unsigned flags)
{
	fc_event *e;
	CUresult r = event_enter(he, &e);
	if (r)
		return r;
	if (flags != 0) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	if (!hs) {
		/* legacy stream: its work is synchronous, so wait here */
		fc_ctx *c;
		r = fc_cur_ctx(&c);
		if (!r)
			r = event_wait(e);
		goto out;
	}
	fc_stream *s = stream_find(hs);
	if (!s) {
		r = CUDA_ERROR_INVALID_HANDLE;
		goto out;
	}
	r = fc_ctx_state(s->ctx, s->ctxgen);
	if (r || e->completed >= e->recorded)
		goto out; /* nothing pending to wait for */
	fc_op *op = event_op(OP_WAIT, e);
	if (!op) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	op->gen = e->recorded;
	r = fc_submit(s, NULL, op);
out:
	fc_unlock();
	return r;
}
