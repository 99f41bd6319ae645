/* The thread-local error message behind cn_last_error(). */
#include "core.h"

#include <stdio.h>

static _Thread_local char cn_err_msg[1024];

const char *cn_last_error(void) { return cn_err_msg; }

void cn_clear_error(void) { cn_err_msg[0] = '\0'; }

void cn_vfail(const char *fmt, va_list ap) { vsnprintf(cn_err_msg, sizeof cn_err_msg, fmt, ap); }

void *cn_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cn_vfail(fmt, ap);
    va_end(ap);
    return NULL;
}

int cn_failc(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cn_vfail(fmt, ap);
    va_end(ap);
    return status;
}
