// shm_ring_ref: the floor the shared-memory links of the TCP communicator
// (backends/tcp over internal/shm) are compared with (package
// internal/tooling/bench, Procs): two processes on one machine, a parent (rank 0)
// and a forked child (rank 1), exchanging bytes through an anonymous
// MAP_SHARED mapping with nothing between them but C11 atomics — no
// library, no system call, no framing, no matching of tags:
//
//   gcc -O3 -o shm_ring_ref shm_ring_ref.c
//   ./shm_ring_ref
//
// (make refs-shm builds it into .bench/procs/, out of the way of xpu
// bench, which runs every program it finds in .bench itself, and writes
// its figures to .bench/shm_ring_ref.out.)
//
// The parent prints one line per figure, "<name> <median> <unit>", the
// median of 5 runs, named "ring.np2.<case>" like the communicator's
// "shm.np2.<case>" (internal/tooling/tcpbench) and Open MPI's
// "vader.np2.<case>" (tcp_mpi_ref.c under --mca btl self,vader):
//
// pingpong.8B  half round trip of an 8-byte message, 10000 round trips a
//              run: each direction has a slot of its own cache line, the
//              8 bytes and a sequence word that the writer stores with
//              release after the bytes and the reader spin-polls with
//              acquire (ns/op)
// bw.<size>    one way, 1 MiB and 4 MiB messages through a single-producer
//              single-consumer byte ring of 1 MiB: the producer copies each
//              message in with memcpy in 64 KiB pieces, publishing its tail
//              after each, while the consumer copies out what is published
//              into the message's own buffer and frees it by publishing its
//              head; a window of 8 messages, then an ack back, as
//              tcp_mpi_ref.c's bw cases, and as many windows a run as
//              move 256 MiB (32 of 1 MiB, 8 of 4 MiB: a run of a few
//              milliseconds is at the mercy of one hiccup of a shared
//              machine) (GB/s, 1e9 bytes/s)
// cma<T>.bw.<size>
//              the ceiling of a single copy: the same windows of 8 messages
//              of 1 MiB and 4 MiB, which the parent copies straight out of
//              the child's buffers with process_vm_readv, as a receiver of
//              the communicator's single copies and of Open MPI's vader
//              does, by 1 thread (cma1) or by 2 threads at once, each
//              taking half of every message (cma2), while the child sleeps
//              (a futex) until the window has arrived. No announcement, no
//              answer per message, no matching: what one and two
//              processors copying from another process move on this
//              machine, the most any single-copy transport can reach
//              (GB/s). Where the kernel refuses the copy (Yama, seccomp)
//              the program says so on stderr and prints no cma figure.
//
// Before the runs of each case an untimed window touches every buffer and
// checks the bytes that arrived. When the machine lets this process use
// at least two CPUs, the parent runs on the first and the child on the
// second. Both sides spin; every few thousand spins they look at the clock
// and at each other (the parent with waitpid(WNOHANG), the child with
// getppid), so a side that dies or stalls for 10 s ends the program with
// an error, not a hang (the sleeping child of the cma cases wakes every
// 10 ms to look). The mapping is anonymous: nothing is left in
// /dev/shm or anywhere else when the program ends.

#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RUNS 5
#define PP_ITERS 10000
#define RING (1u << 20)  // bytes of the byte ring
#ifndef PIECE
#define PIECE (64u << 10) // bytes published at a time (-DPIECE=... to try others)
#endif
#define BW_WINDOW 8
#define BW_RUN_BYTES (256u << 20) // bytes a run of a bw case moves, at least
#define STALL_NS 10000000000LL // a wait this long without progress is an error
#define CHECK_EVERY 4096       // spins between looks at the clock and the peer

#define LINE 128 // two cache lines: the adjacent-line prefetcher pairs them

struct slot {
	alignas(LINE) _Atomic uint64_t seq;
	char data[8];
};

struct shared {
	struct slot ping, pong;                // pingpong.8B: parent→child, child→parent
	alignas(LINE) _Atomic uint64_t arrive[2]; // barrier counts, one per side
	alignas(LINE) _Atomic uint64_t tail;     // bytes the producer has published
	alignas(LINE) _Atomic uint64_t head;     // bytes the consumer has freed
	alignas(LINE) _Atomic uint64_t ack;      // windows the consumer has taken
	alignas(LINE) _Atomic int failed;        // set by a side that gives up
	alignas(LINE) _Atomic uint32_t copied;   // cma: windows the parent has copied (a futex)
	_Atomic int cma_ok;                      // cma: the parent may copy from the child
	uint64_t addr[BW_WINDOW];                // cma: the child's buffers, in its memory
	alignas(LINE) unsigned char ring[RING];
};

static struct shared *sh;
static int rank;     // 0: the parent, 1: the child
static pid_t peer;   // the child's pid, in the parent
static pid_t parent; // the parent's pid, in the child

static int64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void fail(const char *what) {
	atomic_store_explicit(&sh->failed, 1, memory_order_relaxed);
	fprintf(stderr, "shm_ring_ref: rank %d: %s\n", rank, what);
	if (rank == 0 && peer > 0) {
		kill(peer, SIGKILL);
		waitpid(peer, NULL, 0);
	}
	exit(1);
}

// alive checks the peer and the clock; *start is when the wait began, or
// 0 at the first look (the clock is not read on the fast path).
static void alive(int64_t *start) {
	if (atomic_load_explicit(&sh->failed, memory_order_relaxed))
		fail("the other side failed");
	if (rank == 0) {
		int status;
		if (waitpid(peer, &status, WNOHANG) == peer) {
			peer = 0;
			fail("the child ended");
		}
	} else if (getppid() != parent) {
		fail("the parent ended");
	}
	int64_t t = now_ns();
	if (*start == 0)
		*start = t;
	else if (t - *start > STALL_NS)
		fail("no progress for 10 s");
}

// wait_geq spins until *p >= v (acquire) and returns the value seen.
static uint64_t wait_geq(_Atomic uint64_t *p, uint64_t v) {
	int64_t start = 0;
	for (unsigned n = 1;; n++) {
		uint64_t x = atomic_load_explicit(p, memory_order_acquire);
		if (x >= v)
			return x;
		if (n % CHECK_EVERY == 0)
			alive(&start);
	}
}

// barrier: both sides count their arrivals; each waits for the other's.
static uint64_t barriers;
static void barrier(void) {
	barriers++;
	atomic_store_explicit(&sh->arrive[rank], barriers, memory_order_release);
	wait_geq(&sh->arrive[1 - rank], barriers);
}

static int cmp(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

// measure runs body iters times per run after a barrier, RUNS runs, and
// returns the median time per iteration in nanoseconds, as the parent
// sees it.
static double measure(int iters, void (*body)(void *), void *arg) {
	double t[RUNS];
	for (int k = 0; k < RUNS; k++) {
		barrier();
		int64_t start = now_ns();
		for (int i = 0; i < iters; i++)
			body(arg);
		t[k] = (double)(now_ns() - start) / iters;
	}
	qsort(t, RUNS, sizeof t[0], cmp);
	return t[RUNS / 2];
}

static void report(const char *name, double v, const char *unit, const char *format) {
	if (rank != 0)
		return;
	printf("ring.np2.%s ", name);
	printf(format, v);
	printf(" %s\n", unit);
	fflush(stdout);
}

// pingpong.8B

static uint64_t pp_seq;
static char pp_buf[8];

static void pingpong(void *arg) {
	(void)arg;
	pp_seq++;
	if (rank == 0) {
		memcpy(sh->ping.data, pp_buf, 8);
		atomic_store_explicit(&sh->ping.seq, pp_seq, memory_order_release);
		wait_geq(&sh->pong.seq, pp_seq);
		memcpy(pp_buf, sh->pong.data, 8);
	} else {
		wait_geq(&sh->ping.seq, pp_seq);
		memcpy(pp_buf, sh->ping.data, 8);
		memcpy(sh->pong.data, pp_buf, 8);
		atomic_store_explicit(&sh->pong.seq, pp_seq, memory_order_release);
	}
}

// bw.<size>

struct window {
	size_t size;
	unsigned char *buf[BW_WINDOW];
};

static uint64_t pos;     // this side's position in the stream: tail (producer) or head (consumer)
static uint64_t windows; // windows sent or taken

// produce copies n bytes from src into the ring in pieces, publishing the
// tail after each.
static void produce(const unsigned char *src, size_t n) {
	while (n > 0) {
		size_t piece = n < PIECE ? n : PIECE;
		size_t off = pos % RING;
		if (piece > RING - off)
			piece = RING - off; // up to the end of the ring; the rest wraps
		// Room for the piece: the consumer has freed up to pos+piece-RING.
		if (pos + piece > RING)
			wait_geq(&sh->head, pos + piece - RING);
		memcpy(sh->ring + off, src, piece);
		pos += piece;
		atomic_store_explicit(&sh->tail, pos, memory_order_release);
		src += piece;
		n -= piece;
	}
}

// consume copies n bytes out of the ring into dst as they are published,
// freeing each piece by publishing the head.
static void consume(unsigned char *dst, size_t n) {
	uint64_t avail = 0; // published, as last seen
	while (n > 0) {
		if (avail <= pos)
			avail = wait_geq(&sh->tail, pos + 1);
		size_t off = pos % RING;
		size_t piece = avail - pos;
		if (piece > n)
			piece = n;
		if (piece > PIECE)
			piece = PIECE;
		if (piece > RING - off)
			piece = RING - off;
		memcpy(dst, sh->ring + off, piece);
		pos += piece;
		atomic_store_explicit(&sh->head, pos, memory_order_release);
		dst += piece;
		n -= piece;
	}
}

static void bandwidth(void *arg) {
	struct window *w = arg;
	windows++;
	if (rank == 0) {
		for (int i = 0; i < BW_WINDOW; i++)
			produce(w->buf[i], w->size);
		wait_geq(&sh->ack, windows);
	} else {
		for (int i = 0; i < BW_WINDOW; i++)
			consume(w->buf[i], w->size);
		atomic_store_explicit(&sh->ack, windows, memory_order_release);
	}
}

// pattern is byte j of message i as its sender writes it: which message
// and offset it is.
static unsigned char pattern(int i, size_t j) { return (unsigned char)(i * 31 + j * 7 + j / 4096); }

// check_and_time checks the bytes that the untimed window just moved into
// bufs, on the side that received them (rank receiver), then times body
// over as many windows as move BW_RUN_BYTES and reports the rate as name.
static void check_and_time(const char *name, size_t size, unsigned char *const *bufs, int receiver,
                           void (*body)(void *), void *arg) {
	if (rank == receiver)
		for (int i = 0; i < BW_WINDOW; i++)
			for (size_t j = 0; j < size; j++)
				if (bufs[i][j] != pattern(i, j))
					fail("wrong bytes arrived");
	int iters = BW_RUN_BYTES / (BW_WINDOW * size);
	if (iters < 1)
		iters = 1;
	double ns = measure(iters, body, arg);
	report(name, (double)BW_WINDOW * size / ns, "GB/s", "%.2f");
}

static void bw_case(const char *name, size_t size) {
	struct window w = {.size = size};
	for (int i = 0; i < BW_WINDOW; i++) {
		w.buf[i] = malloc(size);
		if (w.buf[i] == NULL)
			fail("out of memory");
		// The producer's bytes say which message and offset they are;
		// the consumer's buffers start as something else.
		for (size_t j = 0; j < size; j++)
			w.buf[i][j] = rank == 0 ? pattern(i, j) : 0xff;
	}
	barrier();
	bandwidth(&w); // untimed: touches every page, and the bytes are checked
	check_and_time(name, size, w.buf, 1, bandwidth, &w);
	for (int i = 0; i < BW_WINDOW; i++)
		free(w.buf[i]);
}

// pin runs the calling thread on the k-th CPU it may use, when there are
// two.
static void pin(cpu_set_t *allowed, int k) {
	if (CPU_COUNT(allowed) < 2)
		return;
	int seen = 0;
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, allowed))
			continue;
		if (seen++ == k) {
			cpu_set_t one;
			CPU_ZERO(&one);
			CPU_SET(cpu, &one);
			sched_setaffinity(0, sizeof one, &one);
			return;
		}
	}
}

// cma<T>.bw.<size>

struct cma {
	size_t size;
	int threads;                   // 1 or 2
	unsigned char *buf[BW_WINDOW]; // the parent's, where the bytes go
	cpu_set_t *allowed;
	_Atomic uint64_t go;   // windows the helper may copy its half of
	_Atomic uint64_t fin;  // windows the helper has copied its half of
	_Atomic int quit;      // the helper ends
};

static void futex_wait(_Atomic uint32_t *w, uint32_t val, long ns) {
	struct timespec ts = {.tv_sec = 0, .tv_nsec = ns};
	syscall(SYS_futex, w, FUTEX_WAIT, val, &ts, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *w) {
	syscall(SYS_futex, w, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

// pull copies n bytes at off of every message of the window from the
// child's memory into the parent's, as many calls as the kernel takes.
static void pull(struct cma *c, size_t off, size_t n) {
	for (int i = 0; i < BW_WINDOW; i++) {
		for (size_t done = 0; done < n;) {
			struct iovec local = {.iov_base = c->buf[i] + off + done, .iov_len = n - done};
			struct iovec remote = {.iov_base = (void *)(uintptr_t)(sh->addr[i] + off + done), .iov_len = n - done};
			ssize_t got = process_vm_readv(peer, &local, 1, &remote, 1, 0);
			if (got <= 0)
				fail("process_vm_readv failed in the middle of a run");
			done += (size_t)got;
		}
	}
}

// helper copies the second half of every window the parent's main thread
// lets it, on the second CPU, spinning in between as a receiver that
// polls would.
static void *helper(void *arg) {
	struct cma *c = arg;
	pin(c->allowed, 1);
	uint64_t seen = 0;
	for (;;) {
		uint64_t go;
		unsigned n = 0;
		while ((go = atomic_load_explicit(&c->go, memory_order_acquire)) == seen) {
			if (atomic_load_explicit(&c->quit, memory_order_relaxed) ||
			    atomic_load_explicit(&sh->failed, memory_order_relaxed))
				return NULL;
			if (++n % CHECK_EVERY == 0)
				sched_yield();
		}
		seen = go;
		pull(c, c->size / 2, c->size - c->size / 2);
		atomic_store_explicit(&c->fin, seen, memory_order_release);
	}
}

// cma_window: the parent copies a window and tells the child, which
// sleeps meanwhile.
static void cma_window(void *arg) {
	struct cma *c = arg;
	windows++;
	if (rank == 1) {
		int64_t start = 0;
		for (;;) {
			uint32_t x = atomic_load_explicit(&sh->copied, memory_order_acquire);
			if ((int32_t)(x - (uint32_t)windows) >= 0)
				return;
			futex_wait(&sh->copied, x, 10000000);
			alive(&start);
		}
	}
	if (c->threads == 2) {
		atomic_store_explicit(&c->go, windows, memory_order_release);
		pull(c, 0, c->size / 2);
		wait_geq(&c->fin, windows);
	} else {
		pull(c, 0, c->size);
	}
	atomic_store_explicit(&sh->copied, (uint32_t)windows, memory_order_release);
	futex_wake(&sh->copied);
}

// cma_allowed reports whether the parent may copy from the child's memory,
// and says why not on stderr; both sides learn the answer.
static int cma_allowed(void) {
	static _Atomic uint64_t probe = 1;
	barrier(); // the child's probe word is in place (the same address in both)
	if (rank == 0) {
		uint64_t got = 0;
		errno = 0;
		struct iovec local = {.iov_base = &got, .iov_len = sizeof got};
		struct iovec remote = {.iov_base = (void *)&probe, .iov_len = sizeof probe};
		int ok = process_vm_readv(peer, &local, 1, &remote, 1, 0) == (ssize_t)sizeof got && got == 1;
		if (!ok)
			fprintf(stderr, "shm_ring_ref: no cma figures: process_vm_readv from the child: %s\n",
				errno ? strerror(errno) : "other bytes");
		atomic_store_explicit(&sh->cma_ok, ok, memory_order_release);
	}
	barrier();
	return atomic_load_explicit(&sh->cma_ok, memory_order_acquire);
}

static void cma_case(const char *name, size_t size, int threads, cpu_set_t *allowed) {
	struct cma c = {.size = size, .threads = threads, .allowed = allowed};
	unsigned char *src[BW_WINDOW] = {0};
	for (int i = 0; i < BW_WINDOW; i++) {
		// The child's bytes say which message and offset they are; the
		// parent's buffers start as something else.
		unsigned char *b = malloc(size);
		if (b == NULL)
			fail("out of memory");
		for (size_t j = 0; j < size; j++)
			b[j] = rank == 1 ? pattern(i, j) : 0xff;
		if (rank == 1) {
			src[i] = b;
			sh->addr[i] = (uint64_t)(uintptr_t)b;
		} else {
			c.buf[i] = b;
		}
	}
	atomic_store_explicit(&sh->copied, (uint32_t)windows, memory_order_release);
	barrier(); // the addresses are in place
	pthread_t th;
	if (rank == 0 && threads == 2 && pthread_create(&th, NULL, helper, &c) != 0)
		fail("pthread_create");
	cma_window(&c); // untimed: touches every page, and the bytes are checked
	check_and_time(name, size, c.buf, 0, cma_window, &c);
	if (rank == 0 && threads == 2) {
		atomic_store_explicit(&c.quit, 1, memory_order_relaxed);
		pthread_join(th, NULL);
	}
	barrier(); // the parent copies no more
	for (int i = 0; i < BW_WINDOW; i++)
		free(rank == 1 ? src[i] : c.buf[i]);
}

int main(void) {
	sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		perror("shm_ring_ref: mmap");
		return 1;
	}
	cpu_set_t allowed;
	CPU_ZERO(&allowed);
	if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
		CPU_ZERO(&allowed);
	fflush(stdout);
	parent = getpid();
	peer = fork();
	if (peer < 0) {
		perror("shm_ring_ref: fork");
		return 1;
	}
	if (peer == 0) {
		rank = 1;
		prctl(PR_SET_PDEATHSIG, SIGKILL); // and alive() checks getppid
		if (getppid() != parent)
			_exit(1);
	}
	pin(&allowed, rank);

	report("pingpong.8B", measure(PP_ITERS, pingpong, NULL) / 2, "ns/op", "%.1f");
	bw_case("bw.1MiB", 1u << 20); // one stream: bw.4MiB goes on where it ends
	bw_case("bw.4MiB", 4u << 20);
	if (cma_allowed()) {
		cma_case("cma1.bw.1MiB", 1u << 20, 1, &allowed);
		cma_case("cma2.bw.1MiB", 1u << 20, 2, &allowed);
		cma_case("cma1.bw.4MiB", 4u << 20, 1, &allowed);
		cma_case("cma2.bw.4MiB", 4u << 20, 2, &allowed);
	}
	barrier();

	if (rank == 1)
		_exit(0);
	int status;
	if (waitpid(peer, &status, 0) != peer || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "shm_ring_ref: the child did not end well\n");
		return 1;
	}
	munmap(sh, sizeof *sh);
	return 0;
}
