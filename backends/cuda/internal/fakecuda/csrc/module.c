/*
 * fakecuda modules: a small PTX front end (comments, .version, .target,
 * .entry NAME(...), balanced braces), module and function handles, and
 * cuLaunchKernel.
 */
#include "fakecuda.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- PTX front end ---- */

typedef struct tok {
	const char *s;
	size_t len;
	int line;
} tok;

typedef struct ptx_entry {
	char *name;
	int nparams;
} ptx_entry;

typedef struct ptx {
	tok *t;
	size_t n, cap;
	int lastline;
	ptx_entry *e;
	int ne;
	char err[256];
} ptx;

static int fail(ptx *p, int line, const char *fmt, ...)
{
	char msg[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	snprintf(p->err, sizeof p->err, "ptxas fatal   : %s at line %d", msg, line);
	return -1;
}

static int wordch(int c) { return isalnum(c) || c == '_' || c == '.' || c == '$' || c == '%'; }

static int push(ptx *p, const char *s, size_t len, int line)
{
	if (p->n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 256;
		tok *t = realloc(p->t, cap * sizeof *t);
		if (!t)
			return fail(p, line, "out of memory");
		p->t = t;
		p->cap = cap;
	}
	p->t[p->n++] = (tok){s, len, line};
	return 0;
}

static int lex(ptx *p, const char *s)
{
	int line = 1;
	while (*s) {
		if (*s == '\n') {
			line++;
			s++;
		} else if (isspace((unsigned char)*s)) {
			s++;
		} else if (s[0] == '/' && s[1] == '/') {
			while (*s && *s != '\n')
				s++;
		} else if (s[0] == '/' && s[1] == '*') {
			int start = line;
			s += 2;
			while (*s && !(s[0] == '*' && s[1] == '/')) {
				if (*s == '\n')
					line++;
				s++;
			}
			if (!*s)
				return fail(p, start, "Unterminated comment");
			s += 2;
		} else if (*s == '"') {
			const char *b = s++;
			while (*s && *s != '"' && *s != '\n')
				s++;
			if (*s != '"')
				return fail(p, line, "Unterminated string");
			s++;
			if (push(p, b, (size_t)(s - b), line))
				return -1;
		} else if (wordch((unsigned char)*s)) {
			const char *b = s;
			while (wordch((unsigned char)*s))
				s++;
			if (push(p, b, (size_t)(s - b), line))
				return -1;
		} else {
			if (push(p, s, 1, line))
				return -1;
			s++;
		}
	}
	p->lastline = line;
	return 0;
}

static int is(const tok *t, const char *w) { return t->len == strlen(w) && memcmp(t->s, w, t->len) == 0; }

static int is_version(const tok *t)
{
	/* digits '.' digits */
	size_t i = 0;
	while (i < t->len && isdigit((unsigned char)t->s[i]))
		i++;
	if (i == 0 || i == t->len || t->s[i] != '.')
		return 0;
	size_t j = ++i;
	while (i < t->len && isdigit((unsigned char)t->s[i]))
		i++;
	return i > j && i == t->len;
}

static int is_sm(const tok *t)
{
	/* sm_NN, optionally followed by a letter suffix (sm_90a) */
	if (t->len < 4 || memcmp(t->s, "sm_", 3) != 0)
		return 0;
	size_t i = 3;
	while (i < t->len && isdigit((unsigned char)t->s[i]))
		i++;
	if (i == 3)
		return 0;
	while (i < t->len && isalpha((unsigned char)t->s[i]))
		i++;
	return i == t->len;
}

static int is_ident(const tok *t)
{
	if (!(isalpha((unsigned char)t->s[0]) || t->s[0] == '_' || t->s[0] == '$' || t->s[0] == '%'))
		return 0;
	for (size_t i = 1; i < t->len; i++)
		if (!(isalnum((unsigned char)t->s[i]) || t->s[i] == '_' || t->s[i] == '$'))
			return 0;
	return 1;
}

static int add_entry(ptx *p, const tok *name, int nparams)
{
	ptx_entry *e = realloc(p->e, (size_t)(p->ne + 1) * sizeof *e);
	if (!e)
		return fail(p, name->line, "out of memory");
	p->e = e;
	char *s = strndup(name->s, name->len);
	if (!s)
		return fail(p, name->line, "out of memory");
	p->e[p->ne++] = (ptx_entry){s, nparams};
	return 0;
}

static int parse(ptx *p, const char *src)
{
	if (lex(p, src))
		return -1;
	if (p->n == 0 || !is(&p->t[0], ".version"))
		return fail(p, p->n ? p->t[0].line : p->lastline, "Missing .version directive");
	if (p->n < 2 || !is_version(&p->t[1]))
		return fail(p, p->t[0].line, "Invalid .version directive");
	int target = 0, depth = 0, open = 0;
	for (size_t i = 2; i < p->n; i++) {
		tok *t = &p->t[i];
		if (is(t, ".version"))
			return fail(p, t->line, "Duplicate .version directive");
		if (is(t, ".target")) {
			if (i + 1 >= p->n || !is_sm(&p->t[i + 1]))
				return fail(p, t->line, "Unresolved .target: expected sm_NN");
			target = 1;
		} else if (is(t, ".entry")) {
			if (!target)
				return fail(p, t->line, "Missing .target directive before .entry");
			if (depth != 0)
				return fail(p, t->line, "Unexpected .entry inside a function body");
			if (i + 1 >= p->n || !is_ident(&p->t[i + 1]))
				return fail(p, t->line, "Expected a name after .entry");
			tok *name = &p->t[i + 1];
			int nparams = 0;
			if (i + 2 < p->n && is(&p->t[i + 2], "(")) {
				size_t j = i + 3;
				while (j < p->n && !is(&p->t[j], ")")) {
					if (is(&p->t[j], ".param"))
						nparams++;
					if (is(&p->t[j], "{") || is(&p->t[j], "}"))
						break;
					j++;
				}
				if (j >= p->n || !is(&p->t[j], ")"))
					return fail(p, name->line, "Unterminated parameter list of .entry %.*s",
						    (int)name->len, name->s);
			} else if (!(i + 2 < p->n && is(&p->t[i + 2], "{"))) {
				return fail(p, name->line, "Expected '(' after .entry %.*s", (int)name->len,
					    name->s);
			}
			if (add_entry(p, name, nparams))
				return -1;
		} else if (is(t, "{")) {
			if (depth++ == 0)
				open = t->line;
		} else if (is(t, "}")) {
			if (depth-- == 0)
				return fail(p, t->line, "Unexpected '}'");
		}
	}
	if (!target)
		return fail(p, p->lastline, "Missing .target directive");
	if (depth != 0)
		return fail(p, p->lastline, "Unclosed '{' opened at line %d", open);
	if (p->ne == 0)
		return fail(p, p->lastline, "Unresolved: no .entry function in the module");
	return 0;
}

static void ptx_free(ptx *p)
{
	for (int i = 0; i < p->ne; i++)
		free(p->e[i].name);
	free(p->e);
	free(p->t);
}

/* Writes msg into the log buffer named by options bufopt/sizeopt, and
 * writes back the bytes used (without the terminating NUL). */
static void write_log(unsigned nopts, const int *opts, void **vals, int bufopt, int sizeopt, const char *msg)
{
	int bi = -1, si = -1;
	for (unsigned i = 0; i < nopts; i++) {
		if (opts[i] == bufopt)
			bi = (int)i;
		if (opts[i] == sizeopt)
			si = (int)i;
	}
	if (si < 0)
		return;
	size_t size = (size_t)(uintptr_t)vals[si];
	size_t used = 0;
	if (bi >= 0 && vals[bi] && size > 0) {
		char *buf = vals[bi];
		used = strlen(msg);
		if (used > size - 1)
			used = size - 1;
		memcpy(buf, msg, used);
		buf[used] = 0;
	}
	vals[si] = (void *)(uintptr_t)used;
}

/* ---- modules ---- */

static fc_module *module_find(CUmodule m)
{
	for (fc_module *x = G.modules; x; x = x->next)
		if (x == m)
			return x;
	return NULL;
}

static fc_func *func_find(CUfunction f)
{
	for (fc_module *x = G.modules; x; x = x->next)
		for (int i = 0; i < x->nfn; i++)
			if (&x->fns[i] == f)
				return f;
	return NULL;
}

static void module_free(fc_module *m)
{
	for (fc_module **pp = &G.modules; *pp; pp = &(*pp)->next)
		if (*pp == m) {
			*pp = m->next;
			break;
		}
	G.n_modules--;
	for (int i = 0; i < m->nfn; i++)
		free(m->fns[i].name);
	free(m->fns);
	free(m);
}

void fc_destroy_ctx_modules(fc_ctx *c, unsigned gen)
{
again:
	for (fc_module *m = G.modules; m; m = m->next)
		if (m->ctx == c && m->ctxgen == gen) {
			G.n_leaked++;
			module_free(m);
			goto again;
		}
}

API CUresult cuModuleLoadDataEx(CUmodule *pm, const void *image, unsigned nopts, int *opts, void **vals)
{
	CUresult r = fc_enter();
	if (r)
		return r;
	if (!pm || !image || (nopts > 0 && (!opts || !vals)))
		return CUDA_ERROR_INVALID_VALUE;
	fc_lock();
	fc_ctx *c;
	r = fc_cur_ctx(&c);
	fc_unlock();
	if (r)
		return r;

	const unsigned char *img = image;
	if ((img[0] == 0x7f && img[1] == 'E' && img[2] == 'L' && img[3] == 'F') ||
	    (img[0] == 0x50 && img[1] == 0xed && img[2] == 0x55 && img[3] == 0xba)) {
		write_log(nopts, opts, vals, 5, 6, "fakecuda: only PTX text images are supported");
		write_log(nopts, opts, vals, 3, 4, "");
		return CUDA_ERROR_NOT_SUPPORTED;
	}
	ptx p;
	memset(&p, 0, sizeof p);
	if (parse(&p, image)) {
		write_log(nopts, opts, vals, 5, 6, p.err);
		write_log(nopts, opts, vals, 3, 4, "");
		ptx_free(&p);
		return CUDA_ERROR_INVALID_PTX;
	}
	fc_module *m = calloc(1, sizeof *m);
	fc_func *fns = calloc((size_t)p.ne, sizeof *fns);
	if (!m || !fns) {
		free(m);
		free(fns);
		ptx_free(&p);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	for (int i = 0; i < p.ne; i++) {
		fns[i].m = m;
		fns[i].name = p.e[i].name; /* ownership moves */
		fns[i].nparams = p.e[i].nparams;
		fns[i].kd = fc_kernel_lookup(p.e[i].name);
		p.e[i].name = NULL;
	}
	m->fns = fns;
	m->nfn = p.ne;
	char info[128];
	snprintf(info, sizeof info, "ptxas info    : fakecuda: %d entry function%s", p.ne,
		 p.ne == 1 ? "" : "s");
	write_log(nopts, opts, vals, 3, 4, info);
	write_log(nopts, opts, vals, 5, 6, "");
	ptx_free(&p);

	fc_lock();
	r = fc_cur_ctx(&c);
	if (r) {
		fc_unlock();
		for (int i = 0; i < m->nfn; i++)
			free(fns[i].name);
		free(fns);
		free(m);
		return r;
	}
	m->ctx = c;
	m->ctxgen = c->gen;
	m->next = G.modules;
	G.modules = m;
	G.n_modules++;
	*pm = m;
	fc_unlock();
	return CUDA_SUCCESS;
}

/* Unloads even when the module's context has failed, then reports it. */
API CUresult cuModuleUnload(CUmodule hm)
{
	CUresult r = fc_enter();
	if (r)
		return r;
	fc_lock();
	fc_module *m = module_find(hm);
	if (!m) {
		fc_unlock();
		return CUDA_ERROR_INVALID_HANDLE;
	}
	r = fc_ctx_state(m->ctx, m->ctxgen);
	module_free(m);
	fc_unlock();
	return r;
}

API CUresult cuModuleGetFunction(CUfunction *pf, CUmodule hm, const char *name)
{
	CUresult r = fc_enter();
	if (r)
		return r;
	fc_lock();
	fc_module *m = module_find(hm);
	if (!m) {
		r = CUDA_ERROR_INVALID_HANDLE;
		goto out;
	}
	r = fc_ctx_state(m->ctx, m->ctxgen);
	if (r)
		goto out;
	if (!pf || !name) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	r = CUDA_ERROR_NOT_FOUND;
	for (int i = 0; i < m->nfn; i++)
		if (strcmp(m->fns[i].name, name) == 0) {
			*pf = &m->fns[i];
			r = CUDA_SUCCESS;
			break;
		}
out:
	fc_unlock();
	return r;
}

/* ---- launch ---- */

API CUresult cuLaunchKernel(CUfunction hf, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
			    unsigned bz, unsigned shmem, CUstream hs, void **params, void **extra)
{
	fc_ctx *c;
	CUresult r = fc_enter_ctx(&c);
	if (r)
		return r;
	fc_stream *s = NULL;
	fc_op *op = NULL;
	fc_func *f = func_find(hf);
	if (!f || f->m->ctx != c || f->m->ctxgen != c->gen) {
		r = CUDA_ERROR_INVALID_HANDLE;
		goto out;
	}
	if (gx < 1 || gy < 1 || gz < 1 || bx < 1 || by < 1 || bz < 1 || bx > 1024 || by > 1024 || bz > 64 ||
	    (uint64_t)bx * by * bz > 1024 || gx > 2147483647u || gy > 65535 || gz > 65535 || shmem > 49152) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	const fc_kdef *kd = f->kd;
	if (!kd) {
		r = CUDA_ERROR_NOT_SUPPORTED;
		goto out;
	}
	if (f->nparams != kd->nparams) {
		/* the PTX entry disagrees with the kernel's signature */
		r = CUDA_ERROR_INVALID_IMAGE;
		goto out;
	}
	if (params && extra && extra[0]) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	if (extra && extra[0]) {
		r = CUDA_ERROR_NOT_SUPPORTED; /* the fake takes kernelParams only */
		goto out;
	}
	if (kd->nparams > 0 && !params) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	for (int i = 0; i < kd->nparams; i++)
		if (!params[i]) {
			r = CUDA_ERROR_INVALID_VALUE;
			goto out;
		}
	r = fc_stream_get(hs, c, &s);
	if (r)
		goto out;
	op = calloc(1, sizeof *op);
	if (!op) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	op->kind = OP_KERNEL;
	op->kd = kd;
	op->grid[0] = gx;
	op->grid[1] = gy;
	op->grid[2] = gz;
	op->block[0] = bx;
	op->block[1] = by;
	op->block[2] = bz;
	op->shmem = shmem;
	for (int i = 0; i < kd->nparams; i++)
		memcpy(&op->args[i], params[i], (size_t)kd->psize[i]);
	if (s) {
		r = fc_submit(s, c, op);
		op = NULL;
		goto out;
	}
	/* the legacy default stream: run now, in the caller; a fault is
	 * still reported asynchronously (sticky), not by the launch */
	unsigned gen = c->gen;
	fc_unlock();
	CUresult fault = fc_run_kernel(op, c, gen);
	free(op);
	op = NULL;
	fc_lock();
	if (fault)
		fc_set_sticky(c, gen, fault);
out:
	fc_stream_unref(s);
	fc_unlock();
	free(op);
	return r;
}
