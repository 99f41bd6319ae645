/* --config FILE: `key = value` lines that stand for `--key value` on the
 * command line (tools.h, cn_tool_config_read). */
#include "tools.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CONFIG (1 << 20)

/* The entries point into one buffer that lives as long as the process: a
 * command keeps option values (paths) as pointers, as it does argv's. */
static char *config_text;

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = '\0';
    return s;
}

int cn_tool_config_read(const char *cmd, const char *path, cn_tool_config_entry **out, int *n) {
    *out = NULL;
    *n = 0;
    free(config_text);
    if (!(config_text = cn_tool_read_text(path, MAX_CONFIG, "a file of 'key = value' lines"))) {
        fprintf(stderr, "chutney %s: --config: %s\n", cmd, cn_tool_error());
        return CN_TOOL_FAILED;
    }
    size_t len = strlen(config_text);
    int lines = 1;
    for (size_t i = 0; i < len; i++) lines += config_text[i] == '\n';
    cn_tool_config_entry *e = calloc((size_t)lines, sizeof *e);
    if (!e) {
        fprintf(stderr, "chutney %s: --config %s: out of memory\n", cmd, path);
        return CN_TOOL_FAILED;
    }
    int line = 0, k = 0;
    for (char *p = config_text, *next; p; p = next) {
        next = strchr(p, '\n');
        if (next) *next++ = '\0';
        line++;
        char *hash = strchr(p, '#');
        if (hash) *hash = '\0';
        char *s = trim(p);
        if (!*s) continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            fprintf(stderr, "chutney %s: %s:%d: expected 'key = value' (an option's name without "
                            "its dashes, such as 'lr = 0.01'), got '%.60s'\n", cmd, path, line, s);
            free(e);
            return CN_TOOL_USAGE;
        }
        *eq = '\0';
        char *key = trim(s), *val = trim(eq + 1);
        bool bad_key = !*key || key[0] == '-';
        for (char *c = key; *c && !bad_key; c++) {
            if (*c == '_') *c = '-'; /* weight_decay reads as weight-decay */
            bad_key = !(isalnum((unsigned char)*c) || *c == '-');
        }
        if (bad_key || !*val) {
            fprintf(stderr, "chutney %s: %s:%d: %s\n", cmd, path, line,
                    bad_key ? "the key must be an option's name without its dashes (such as "
                              "'weight-decay')"
                            : "no value after '='");
            free(e);
            return CN_TOOL_USAGE;
        }
        e[k++] = (cn_tool_config_entry){key, val, line};
    }
    *out = e;
    *n = k;
    return 0;
}
