/* PyTorch as an oracle, in the test's own run: the test queues cases (a
 * Python expression over tensors t0, t1, ... and the tensors' values), one
 * /usr/bin/python3 process computes them all with torch in f64, and the
 * test reads the results back. Setup installs python3-torch, so a missing
 * interpreter or torch is a failure, not a skip.
 *
 *     tr_begin();
 *     int k = tr_add("F.conv2d(t0, t1, padding=1)", 2, (cn_tensor *[]){x, w});
 *     tr_run();                       // one python3 for every case
 *     cn_tensor *want = tr_result(k); // f64, torch's shape
 *     tr_end();
 */
#ifndef CN_TEST_TORCH_REF_H
#define CN_TEST_TORCH_REF_H

#include "harness.h"

#include <unistd.h>

#define TR_PYTHON "/usr/bin/python3"
#define TR_MAX_CASES 512

static const char tr_script[] =
    "import sys\n"
    "import torch\n"
    "import torch.nn.functional as F\n"
    "torch.set_num_threads(1)\n"
    "lines = open(sys.argv[1]).read().split('\\n')\n"
    "out = open(sys.argv[2], 'w')\n"
    "i = 0\n"
    "while i < len(lines) and lines[i] == 'case':\n"
    "    expr, n = lines[i + 1], int(lines[i + 2])\n"
    "    i += 3\n"
    "    env = {'F': F, 'torch': torch}\n"
    "    for k in range(n):\n"
    "        shape = [int(v) for v in lines[i].split()]\n"
    "        vals = [float(v) for v in lines[i + 1].split()]\n"
    "        env['t%d' % k] = torch.tensor(vals, dtype=torch.float64).reshape(shape)\n"
    "        i += 2\n"
    "    r = eval(expr, env).to(torch.float64)\n"
    "    out.write(' '.join(str(s) for s in r.shape) + '\\n')\n"
    "    out.write(' '.join(repr(v) for v in r.flatten().tolist()) + '\\n')\n"
    "out.close()\n";

static struct {
    char in_path[64], out_path[64], py_path[64];
    FILE *in;
    int ncases;
    cn_tensor *results[TR_MAX_CASES];
} tr;

static void tr_begin(void) {
    memset(&tr, 0, sizeof tr);
    strcpy(tr.in_path, "/tmp/cn_torch_in_XXXXXX");
    int fd = mkstemp(tr.in_path);
    CHECK_MSG(fd >= 0, "torch_ref: cannot create a temporary file");
    if (fd >= 0) tr.in = fdopen(fd, "w");
}

/* Queue expr over tensors t0..t(n-1) (any dtype and layout; sent as f64).
 * Returns the case number for tr_result. */
static int tr_add(const char *expr, int n, cn_tensor *const *t) {
    if (!tr.in || tr.ncases >= TR_MAX_CASES) return -1;
    fprintf(tr.in, "case\n%s\n%d\n", expr, n);
    for (int k = 0; k < n; k++) {
        int nd = cn_ndim(t[k]);
        for (int d = 0; d < nd; d++) fprintf(tr.in, "%s%" PRId64, d ? " " : "", cn_shape(t[k])[d]);
        fputc('\n', tr.in);
        int64_t numel = cn_numel(t[k]);
        for (int64_t i = 0; i < numel; i++) fprintf(tr.in, "%s%.17g", i ? " " : "", th_at(t[k], i));
        fputc('\n', tr.in);
    }
    return tr.ncases++;
}

/* Whitespace-separated tokens of one line, parsed into vals (grown). */
static int64_t tr_parse_line(char **cur, double **vals, int64_t *cap) {
    char *line = *cur, *nl = strchr(line, '\n');
    if (!nl) return -1;
    *nl = '\0';
    *cur = nl + 1;
    int64_t n = 0;
    char *p = line, *end;
    for (;;) {
        double v = strtod(p, &end);
        if (end == p) break;
        if (n == *cap) {
            *cap = *cap ? 2 * *cap : 64;
            *vals = realloc(*vals, sizeof(double) * (size_t)*cap);
        }
        (*vals)[n++] = v;
        p = end;
    }
    return n;
}

/* Runs python3 on every queued case. */
static void tr_run(void) {
    if (!tr.in) return;
    fclose(tr.in);
    tr.in = NULL;
    strcpy(tr.out_path, "/tmp/cn_torch_out_XXXXXX");
    strcpy(tr.py_path, "/tmp/cn_torch_py_XXXXXX");
    int fo = mkstemp(tr.out_path), fp = mkstemp(tr.py_path);
    CHECK_MSG(fo >= 0 && fp >= 0, "torch_ref: cannot create temporary files");
    if (fo < 0 || fp < 0) return;
    close(fo);
    FILE *py = fdopen(fp, "w");
    fputs(tr_script, py);
    fclose(py);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s %s %s %s", TR_PYTHON, tr.py_path, tr.in_path, tr.out_path);
    int rc = system(cmd);
    CHECK_MSG(rc == 0, "torch_ref: `%s` failed (status %d); the tests need python3 with torch "
              "(scripts/setup.sh installs python3-torch)", cmd, rc);
    if (rc != 0) return;

    FILE *f = fopen(tr.out_path, "rb");
    if (!f) return;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)size + 1);
    size_t got = fread(buf, 1, (size_t)size, f);
    buf[got] = '\0';
    fclose(f);
    char *cur = buf;
    double *vals = NULL;
    int64_t cap = 0;
    for (int k = 0; k < tr.ncases; k++) {
        int64_t shape[CN_MAX_DIMS];
        int64_t nd = tr_parse_line(&cur, &vals, &cap);
        CHECK_MSG(nd >= 0 && nd <= CN_MAX_DIMS, "torch_ref: case %d: no result", k);
        if (nd < 0 || nd > CN_MAX_DIMS) break;
        for (int d = 0; d < nd; d++) shape[d] = (int64_t)vals[d];
        int64_t n = tr_parse_line(&cur, &vals, &cap);
        CHECK_MSG(n == th_numel((int)nd, shape), "torch_ref: case %d: %" PRId64 " values", k, n);
        if (n != th_numel((int)nd, shape)) break;
        cn_tensor *t = cn_from_data(CN_F64, (int)nd, shape, vals);
        tr.results[k] = cn_retain(t); /* the scope keeps its own reference */
    }
    free(vals);
    free(buf);
}

/* torch's result of case k (f64), owned by the torch_ref session. */
static cn_tensor *tr_result(int k) { return k >= 0 && k < tr.ncases ? tr.results[k] : NULL; }

static void tr_end(void) {
    for (int k = 0; k < tr.ncases; k++) cn_release(tr.results[k]);
    if (tr.in) fclose(tr.in);
    if (tr.in_path[0]) unlink(tr.in_path);
    if (tr.out_path[0]) unlink(tr.out_path);
    if (tr.py_path[0]) unlink(tr.py_path);
    memset(&tr, 0, sizeof tr);
}

/* |got - want| <= atol + rtol |want| everywhere, same shape; reports the
 * first difference. */
static void tr_check_close(const char *what, const cn_tensor *got, const cn_tensor *want,
                           double rtol, double atol) {
    char b1[160], b2[160];
    th_checks++;
    if (!got || !want) {
        th_fail(__FILE__, __LINE__, "%s: %s (error: %s)", what, got ? "no reference" : "NULL",
                cn_last_error());
        return;
    }
    int nd = cn_ndim(got);
    if (!th_same_shape(want, nd, cn_shape(got))) {
        th_fail(__FILE__, __LINE__, "%s: shape %s, expected %s", what,
                cn_shape_str(got, b1, sizeof b1), cn_shape_str(want, b2, sizeof b2));
        return;
    }
    int64_t n = cn_numel(got);
    for (int64_t i = 0; i < n; i++) {
        double a = th_at(got, i), b = th_at(want, i);
        if (!th_close(a, b, rtol, atol)) {
            th_fail(__FILE__, __LINE__, "%s: element %" PRId64 " of %s is %.10g, expected %.10g",
                    what, i, cn_shape_str(got, b1, sizeof b1), a, b);
            return;
        }
    }
}

#endif
