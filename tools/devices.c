/* `chutney devices`: every device this build and machine have, with its
 * memory and compute units. */
#include "tools.h"

#include <stdio.h>
#include <string.h>

static const char *const kinds[] = {"cpu", "opencl", "cuda"};

int cn_tool_devices(int argc, char **argv) {
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: chutney devices [--json]\n\n"
                   "Lists the devices Chutney can run on: each as its name for --device\n"
                   "(cpu:0, opencl:0, cuda:0, ...), with its memory and compute units (and\n"
                   "a GPU's compute capability), and for each kind without devices, why.\n");
            return 0;
        } else {
            static const char *const opts[] = {"--json", "--help"};
            return cn_tool_unknown_option("devices", argv[i], opts, 2);
        }
    }
    if (json) printf("[");
    int shown = 0;
    for (int k = 0; k < CN_DEVICE_KIND_COUNT; k++) {
        int n = cn_device_count((cn_device_kind)k);
        for (int i = 0; i < n; i++) {
            cn_device_info info;
            cn_device d = CN_DEVICE(k, i);
            char name[32];
            cn_device_str(d, name, sizeof name);
            if (cn_device_get_info(d, &info) < 0) {
                fprintf(stderr, "devices: %s: %s\n", name, cn_last_error());
                continue;
            }
            double gib = (double)info.memory_bytes / (1024.0 * 1024 * 1024);
            if (json) {
                printf("%s{\"device\": \"%s\", \"name\": \"", shown ? ", " : "", name);
                for (const char *c = info.name; *c; c++)
                    printf(*c == '"' || *c == '\\' ? "\\%c" : "%c", *c);
                printf("\", \"memory_bytes\": %llu, \"compute_units\": %d",
                       (unsigned long long)info.memory_bytes, info.compute_units);
                if (info.capability[0])
                    printf(", \"compute_capability\": \"%s\"", info.capability);
                printf("}");
            } else {
                char cc[40] = "";
                if (info.capability[0])
                    snprintf(cc, sizeof cc, "compute capability %s, ", info.capability);
                printf("%-10s %-44.44s %8.1f GiB  %3d compute units  %s%s\n", name, info.name,
                       gib, info.compute_units, cc, info.driver);
            }
            shown++;
        }
    }
    if (json) {
        printf("]\n");
    } else {
        /* Why a kind has none: the library's error for its first device
         * (not built, no platform, no driver, no GPU). */
        for (int k = 1; k < CN_DEVICE_KIND_COUNT; k++) {
            if (cn_device_count((cn_device_kind)k) > 0) continue;
            cn_device_info info;
            const char *why = "none";
            if (cn_device_get_info(CN_DEVICE(k, 0), &info) < 0) why = cn_last_error();
            printf("%-10s none: %s\n", kinds[k], why);
            cn_clear_error();
        }
    }
    return 0;
}

int cn_tool_device(const char *prefix, const char *s, cn_device *out) {
    *out = CN_CPU;
    if (!s) return 0;
    if (cn_device_parse(s, out) < 0) {
        fprintf(stderr, "%s: bad --device: %s; `chutney devices` lists the devices here\n", prefix,
                cn_last_error());
        return 2;
    }
    int n = cn_device_count((cn_device_kind)out->kind);
    if (out->index < n) return 0;
    char name[32];
    cn_device_str(*out, name, sizeof name);
    if (n == 0) {
        fprintf(stderr, "%s: no device %s: this machine (or build) has no %s device; "
                        "`chutney devices` lists the devices here\n",
                prefix, name, kinds[out->kind]);
    } else {
        char range[80];
        if (n == 1) snprintf(range, sizeof range, "%s:0", kinds[out->kind]);
        else snprintf(range, sizeof range, "%s:0 to %s:%d", kinds[out->kind], kinds[out->kind], n - 1);
        fprintf(stderr, "%s: no device %s: there %s %d %s device%s (%s); "
                        "`chutney devices` lists them\n",
                prefix, name, n == 1 ? "is" : "are", n, kinds[out->kind], n == 1 ? "" : "s", range);
    }
    return 1;
}
