/* The tools' own failure messages (tools.h: cn_tool_fail, cn_tool_error). */
#include "tools.h"

#include <stdarg.h>
#include <stdio.h>

static char tool_msg[1024];

void cn_tool_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tool_msg, sizeof tool_msg, fmt, ap);
    va_end(ap);
    cn_clear_error();
}

const char *cn_tool_error(void) {
    const char *lib = cn_last_error();
    return *lib ? lib : tool_msg;
}
