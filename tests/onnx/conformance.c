/* The ONNX conformance suite (Debian's libonnx-testdata): every case of the
 * node, simple, pytorch-converted and pytorch-operator folders is loaded,
 * run on each of its test_data_set_N inputs and compared with the stored
 * outputs (rtol 1e-3, atol 1e-7, the suite's defaults; same dtype and shape;
 * integers and bools exactly; NaN matches NaN). Each case runs in a child
 * process, so a crash (or a leak under LeakSanitizer, or a hang) is counted
 * and reported, never hidden. Prints per folder passed / failed /
 * unsupported / crashed and the failing names, and fails if any folder
 * passes fewer cases than its floor (conformance_floor.txt) or anything
 * crashed.
 *
 *   conformance DATA_DIR FLOOR_FILE [-v] [--device DEV] [NAME_SUBSTRING]
 *
 * --device runs every model there (inputs copied to it, outputs back): the
 * same floors hold on every device.
 *
 * Exit 77 (CTest's skip) without the test data or without ONNX support. */
#include <chutney.h>

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define RTOL 1e-3
#define ATOL 1e-7
#define CASE_TIMEOUT_S 60
#define MAX_IO 32

/* A child's exit status; anything else (a sanitizer's report exits 1 or 23,
 * a signal) is a crash. */
enum { R_PASS = 10, R_FAIL = 11, R_UNSUP = 12 };

/* --device: where the models run (the CPU unless given). */
static cn_device run_device = {CN_DEVICE_CPU, 0};

static const char *const folders[] = {"node", "simple", "pytorch-converted", "pytorch-operator"};
#define NFOLDERS 4

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sorted entries of dir whose names start with prefix. */
static int list_dir(const char *dir, const char *prefix, char ***out) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0, cap = 64;
    char **v = malloc(sizeof *v * (size_t)cap);
    struct dirent *e;
    while (v && (e = readdir(d))) {
        if (e->d_name[0] == '.' || strncmp(e->d_name, prefix, strlen(prefix))) continue;
        if (n == cap) {
            char **nv = realloc(v, sizeof *v * (size_t)(cap *= 2));
            if (!nv) break;
            v = nv;
        }
        v[n++] = strdup(e->d_name);
    }
    closedir(d);
    if (!v) return -1;
    qsort(v, (size_t)n, sizeof *v, cmp_str);
    *out = v;
    return n;
}

static void free_list(char **v, int n) {
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

static bool exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

/* Writes the reason to fd and returns the result code. */
static int say(int fd, int code, const char *fmt, const char *a, const char *b) {
    char msg[600];
    snprintf(msg, sizeof msg, fmt, a, b);
    for (char *p = msg; *p; p++)
        if (*p == '\n') *p = ' ';
    if (write(fd, msg, strlen(msg)) < 0) { /* the parent reports the code anyway */
    }
    return code;
}

static bool unsupported_msg(const char *m) { return strstr(m, "unsupported: ") != NULL; }

static int compare(cn_tensor *got, cn_tensor *want, char *why, size_t n) {
    char b1[128], b2[128];
    if (cn_tensor_dtype(got) != cn_tensor_dtype(want) || cn_ndim(got) != cn_ndim(want)) {
        snprintf(why, n, "got %s, expected %s", cn_shape_str(got, b1, sizeof b1),
                 cn_shape_str(want, b2, sizeof b2));
        return -1;
    }
    for (int i = 0; i < cn_ndim(got); i++)
        if (cn_dim(got, i) != cn_dim(want, i)) {
            snprintf(why, n, "got %s, expected %s", cn_shape_str(got, b1, sizeof b1),
                     cn_shape_str(want, b2, sizeof b2));
            return -1;
        }
    int64_t k = cn_numel(got);
    double *g = malloc(sizeof(double) * (size_t)(k ? k : 1)), *w = malloc(sizeof(double) * (size_t)(k ? k : 1));
    int rc = 0;
    if (!g || !w || cn_copy_to_buffer(got, CN_F64, g, sizeof(double) * (size_t)k) < 0 ||
        cn_copy_to_buffer(want, CN_F64, w, sizeof(double) * (size_t)k) < 0) {
        snprintf(why, n, "cannot read the values");
        rc = -1;
    }
    bool is_float = cn_dtype_is_float(cn_tensor_dtype(want));
    for (int64_t i = 0; rc == 0 && i < k; i++) {
        bool ok;
        if (isnan(w[i])) ok = isnan(g[i]);
        else if (!is_float) ok = g[i] == w[i];
        else if (isinf(w[i])) ok = g[i] == w[i];
        else ok = fabs(g[i] - w[i]) <= ATOL + RTOL * fabs(w[i]);
        if (!ok) {
            snprintf(why, n, "element %lld: got %.9g, expected %.9g", (long long)i, g[i], w[i]);
            rc = -1;
        }
    }
    free(g);
    free(w);
    return rc;
}

/* One case, in the child. */
static int run_case(const char *dir, int fd, bool *bound_any) {
    char path[4600];
    char **sets;
    int nsets = list_dir(dir, "test_data_set_", &sets);
    if (nsets <= 0) return say(fd, R_FAIL, "no test data sets", "", "");
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    int result = R_PASS;
    for (int s = 0; s < nsets && result == R_PASS; s++) {
        cn_scope_begin();
        cn_tensor *inputs[MAX_IO], *want[MAX_IO];
        int nin = 0, nout = 0;
        char p[4800];
        for (; nin < MAX_IO; nin++) {
            snprintf(p, sizeof p, "%s/%s/input_%d.pb", dir, sets[s], nin);
            if (!exists(p)) break;
            inputs[nin] = cn_onnx_load_tensor(p);
            if (!inputs[nin]) {
                result = say(fd, unsupported_msg(cn_last_error()) ? R_UNSUP : R_FAIL, "input: %s",
                             cn_last_error(), "");
                break;
            }
        }
        for (; result == R_PASS && nout < MAX_IO; nout++) {
            snprintf(p, sizeof p, "%s/%s/output_%d.pb", dir, sets[s], nout);
            if (!exists(p)) break;
            want[nout] = cn_onnx_load_tensor(p);
            if (!want[nout]) {
                result = say(fd, unsupported_msg(cn_last_error()) ? R_UNSUP : R_FAIL, "output: %s",
                             cn_last_error(), "");
                break;
            }
        }
        cn_onnx_model *m = NULL;
        cn_tensor *feed[MAX_IO];
        int nfeed = nin;
        if (result == R_PASS) {
            /* The inputs' concrete shapes, by position, so shapes fold. */
            cn_onnx_input_shape shapes[MAX_IO];
            for (int i = 0; i < nin; i++) {
                shapes[i].name = NULL;
                shapes[i].ndim = cn_ndim(inputs[i]);
                for (int d = 0; d < shapes[i].ndim; d++) shapes[i].shape[d] = cn_dim(inputs[i], d);
                feed[i] = inputs[i];
            }
            cn_onnx_load_opts opts = {.shapes = shapes, .nshapes = nin};
            m = cn_onnx_load(path, &opts);
            /* Arguments given as graph inputs that the importer needs at
             * load time (a Reshape's shape, a Slice's starts, Dropout's
             * training_mode, Resize's scales): first bind the integer and
             * bool inputs, then every input but the first (the data), and
             * run the rest. Such passes are counted apart. */
            for (int stage = 0; stage < 2 && !m && strstr(cn_last_error(), "is computed at run time");
                 stage++) {
                cn_onnx_input_value vals[MAX_IO];
                nfeed = 0;
                for (int i = 0; i < nin; i++) {
                    cn_dtype dt = cn_tensor_dtype(inputs[i]);
                    bool bind = stage == 0 ? dt == CN_I64 || dt == CN_I32 || dt == CN_BOOL : i > 0;
                    vals[i] = (cn_onnx_input_value){NULL, bind ? inputs[i] : NULL};
                    if (!bind) feed[nfeed++] = inputs[i];
                }
                cn_onnx_load_opts o2 = {.shapes = shapes, .nshapes = nin, .values = vals, .nvalues = nin};
                m = cn_onnx_load(path, &o2);
                *bound_any = true;
            }
            if (!m)
                result = say(fd, unsupported_msg(cn_last_error()) ? R_UNSUP : R_FAIL, "load: %s",
                             cn_last_error(), "");
        }
        if (result == R_PASS && (cn_onnx_num_inputs(m) != nfeed || cn_onnx_num_outputs(m) != nout)) {
            char b[64];
            snprintf(b, sizeof b, "%d/%d", cn_onnx_num_inputs(m), cn_onnx_num_outputs(m));
            result = say(fd, R_FAIL, "the model has %s inputs/outputs, the data %s", b, "");
        }
        cn_tensor *got[MAX_IO];
        if (result == R_PASS && run_device.kind != CN_DEVICE_CPU)
            for (int i = 0; i < nfeed && result == R_PASS; i++)
                if (!(feed[i] = cn_to(feed[i], run_device)))
                    result = say(fd, R_FAIL, "to device: %s", cn_last_error(), "");
        if (result == R_PASS && cn_onnx_run(m, feed, got) < 0)
            result = say(fd, unsupported_msg(cn_last_error()) ? R_UNSUP : R_FAIL, "run: %s",
                         cn_last_error(), "");
        for (int o = 0; result == R_PASS && o < nout; o++) {
            char why[300];
            if (run_device.kind != CN_DEVICE_CPU && !(got[o] = cn_to(got[o], CN_CPU))) {
                result = say(fd, R_FAIL, "to the CPU: %s", cn_last_error(), "");
                break;
            }
            if (compare(got[o], want[o], why, sizeof why) < 0)
                result = say(fd, R_FAIL, "output %s: %s", cn_onnx_output_name(m, o), why);
        }
        cn_onnx_free(m);
        cn_scope_end();
    }
    free_list(sets, nsets);
    if (result == R_PASS && *bound_any) say(fd, R_PASS, "bound", "", "");
    return result;
}

typedef struct tally {
    int pass, bound, fail, unsup, crash, total;
} tally;

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: conformance DATA_DIR FLOOR_FILE [-v] [--device DEV] [NAME_SUBSTRING]\n");
        return 2;
    }
    const char *root = argv[1], *floor_file = argv[2], *filter = NULL;
    bool verbose = false;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "-v")) {
            verbose = true;
        } else if (!strcmp(argv[i], "--device") && i + 1 < argc) {
            if (cn_device_parse(argv[++i], &run_device) < 0) {
                fprintf(stderr, "conformance: %s\n", cn_last_error());
                return 2;
            }
            /* Not initialised here: each case's child process opens it. */
        } else {
            filter = argv[i];
        }
    }
    if (!exists(root)) {
        printf("SKIP: no ONNX test data at %s (apt-get install libonnx-testdata)\n", root);
        return 77;
    }
    if (!cn_onnx_load_tensor("/nonexistent") && strstr(cn_last_error(), "built without")) {
        printf("SKIP: %s\n", cn_last_error());
        return 77;
    }
    int floors[NFOLDERS] = {0};
    FILE *ff = fopen(floor_file, "r");
    if (!ff) {
        fprintf(stderr, "conformance: cannot open the floor file %s\n", floor_file);
        return 1;
    }
    char line[256];
    while (fgets(line, sizeof line, ff)) {
        char name[128];
        int v;
        if (line[0] == '#' || sscanf(line, "%127s %d", name, &v) != 2) continue;
        for (int f = 0; f < NFOLDERS; f++)
            if (!strcmp(name, folders[f])) floors[f] = v;
    }
    fclose(ff);

    tally t[NFOLDERS] = {0};
    int bad = 0;
    for (int f = 0; f < NFOLDERS; f++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/%s", root, folders[f]);
        char **cases;
        int ncases = list_dir(dir, "test_", &cases);
        if (ncases < 0) {
            printf("%s: missing\n", folders[f]);
            continue;
        }
        printf("== %s\n", folders[f]);
        for (int i = 0; i < ncases; i++) {
            if (filter && !strstr(cases[i], filter)) continue;
            char cdir[4400];
            snprintf(cdir, sizeof cdir, "%s/%s", dir, cases[i]);
            int fds[2];
            if (pipe(fds) < 0) return 1;
            fflush(stdout);
            pid_t pid = fork();
            if (pid < 0) return 1;
            if (pid == 0) {
                close(fds[0]);
                alarm(CASE_TIMEOUT_S);
                bool bound = false;
                int r = run_case(cdir, fds[1], &bound);
                close(fds[1]);
                exit(r);
            }
            close(fds[1]);
            char msg[700];
            size_t got = 0;
            ssize_t k;
            while (got < sizeof msg - 1 && (k = read(fds[0], msg + got, sizeof msg - 1 - got)) > 0)
                got += (size_t)k;
            msg[got] = '\0';
            close(fds[0]);
            int st;
            while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
            }
            t[f].total++;
            int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
            if (code == R_PASS) {
                t[f].pass++;
                if (!strcmp(msg, "bound")) {
                    t[f].bound++;
                    if (verbose) printf("  passed %s with inputs bound at load time\n", cases[i]);
                }
            }
            else if (code == R_UNSUP) {
                t[f].unsup++;
                if (verbose) printf("  unsupported %s: %s\n", cases[i], msg);
            } else if (code == R_FAIL) {
                t[f].fail++;
                printf("  FAILED %s: %s\n", cases[i], msg);
            } else {
                t[f].crash++;
                if (WIFSIGNALED(st))
                    printf("  CRASHED %s: signal %d%s\n", cases[i], WTERMSIG(st),
                           WTERMSIG(st) == SIGALRM ? " (timeout)" : "");
                else printf("  CRASHED %s: exit status %d (a sanitizer report?) %s\n", cases[i], code, msg);
            }
        }
        free_list(cases, ncases);
    }
    printf("\nONNX conformance (rtol %g, atol %g):\n", RTOL, ATOL);
    for (int f = 0; f < NFOLDERS; f++) {
        printf("  %-18s %4d passed (%d with inputs bound at load time), %4d failed, "
               "%4d unsupported, %d crashed, of %d (floor %d)\n",
               folders[f], t[f].pass, t[f].bound, t[f].fail, t[f].unsup, t[f].crash, t[f].total,
               floors[f]);
        if (!filter && t[f].pass < floors[f]) {
            printf("  FAIL: %s passed %d, below its floor %d\n", folders[f], t[f].pass, floors[f]);
            bad = 1;
        }
        if (t[f].crash) bad = 1;
    }
    return bad;
}
