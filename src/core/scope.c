/* Scopes: every tensor a public function returns goes to the innermost open
 * scope, which releases it at cn_scope_end unless it was kept. One growing
 * array per thread holds the tensors of all open scopes, and a stack of start
 * indices marks where each scope begins. */
#include "core.h"
#include "thread_state.h"

#include <stdlib.h>

#define CN_MAX_SCOPE_DEPTH 256

static _Thread_local cn_tensor **scope_items;
static _Thread_local size_t scope_n, scope_cap;
static _Thread_local size_t scope_starts[CN_MAX_SCOPE_DEPTH];
static _Thread_local int scope_depth;
static _Thread_local int scope_suspended; /* cn_scope_suspend calls not resumed */

int cn_scope_depth(void) { return scope_depth; }

void cn_scope_begin(void) {
    if (scope_depth >= CN_MAX_SCOPE_DEPTH) {
        /* Still balanced with cn_scope_end: the extra levels merge into the last. */
        cn_fail("scope_begin: more than %d nested scopes", CN_MAX_SCOPE_DEPTH);
        scope_depth++;
        return;
    }
    scope_starts[scope_depth++] = scope_n;
}

void cn_scope_end(void) {
    if (scope_depth == 0) {
        cn_fail("scope_end: no scope is open");
        return;
    }
    scope_depth--;
    if (scope_depth >= CN_MAX_SCOPE_DEPTH) return;
    size_t start = scope_starts[scope_depth];
    /* Release newest first: results die before the inputs they were made from. */
    while (scope_n > start) {
        cn_tensor *t = scope_items[--scope_n];
        cn_release(t);
    }
    if (scope_depth == 0 && !scope_suspended && scope_cap > 4096) {
        free(scope_items);
        scope_items = NULL;
        scope_cap = 0;
    }
}

cn_tensor *cn_scope_add(cn_tensor *t) {
    if (!t || scope_depth == 0) return t;
    if (scope_n == scope_cap) {
        size_t ncap = scope_cap ? scope_cap * 2 : 256;
        cn_tensor **ni = realloc(scope_items, ncap * sizeof *ni);
        if (!ni) {
            /* Cannot track it: hand it back untracked rather than lose it
             * (callers that ignore the result still hold it). */
            cn_fail("scope: out of memory tracking a tensor (it will leak)");
            return t;
        }
        if (!scope_items) cn_thread_state_keep();
        scope_items = ni;
        scope_cap = ncap;
    }
    scope_items[scope_n++] = t;
    return t;
}

void cn_scope_thread_free(void) {
    free(scope_items);
    scope_items = NULL;
    scope_n = scope_cap = 0;
}

cn_tensor *cn_keep(cn_tensor *t) {
    CN_CHECK_LIVE("keep", t, NULL);
    /* Beyond the depth limit the enclosing level is merged with this one:
     * the tensor already lives as long as it would after the move. */
    if (!t || scope_depth == 0 || scope_depth > CN_MAX_SCOPE_DEPTH) return t;
    size_t start = scope_starts[scope_depth - 1];
    /* Search from the newest: the kept tensor is usually among the last made. */
    for (size_t i = scope_n; i > start; i--) {
        if (scope_items[i - 1] == t) {
            if (scope_depth > 1) {
                /* Move it just below the innermost scope's start. */
                memmove(&scope_items[start + 1], &scope_items[start],
                        (i - 1 - start) * sizeof *scope_items);
                scope_items[start] = t;
                scope_starts[scope_depth - 1]++;
            } else {
                memmove(&scope_items[i - 1], &scope_items[i], (scope_n - i) * sizeof *scope_items);
                scope_n--;
            }
            return t;
        }
    }
    /* Not made in this scope (a parameter, an outer tensor): whoever owns it
     * already outlives the scope. */
    return t;
}

typedef struct scope_saved {
    int depth;
    size_t starts[];
} scope_saved;

void *cn_scope_suspend(void) {
    int nd = scope_depth < CN_MAX_SCOPE_DEPTH ? scope_depth : CN_MAX_SCOPE_DEPTH;
    scope_saved *s = malloc(sizeof *s + sizeof(size_t) * (size_t)nd);
    if (!s) return cn_fail("scope_suspend: out of memory");
    /* Scopes opened while suspended reuse the low start slots; the open
     * ones' items stay where they are, below every new scope's start. */
    s->depth = scope_depth;
    memcpy(s->starts, scope_starts, sizeof(size_t) * (size_t)nd);
    scope_depth = 0;
    scope_suspended++;
    return s;
}

void cn_scope_resume(void *saved) {
    scope_saved *s = saved;
    if (!s) return;
    if (scope_depth != 0) cn_fail("scope_resume: %d scopes opened while suspended are still open", scope_depth);
    int nd = s->depth < CN_MAX_SCOPE_DEPTH ? s->depth : CN_MAX_SCOPE_DEPTH;
    memcpy(scope_starts, s->starts, sizeof(size_t) * (size_t)nd);
    scope_depth = s->depth;
    scope_suspended--;
    free(s);
}
