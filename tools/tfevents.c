/* TensorBoard event files. A file is a sequence of TFRecords, each
 *   uint64 length, uint32 masked CRC-32C of those 8 bytes,
 *   length bytes of data, uint32 masked CRC-32C of the data
 * (little-endian), and each record's data is an Event proto: the first one
 * says "brain.Event:2", the rest carry Summary values. The protos are
 * tools/proto/tfevent.proto, TensorFlow's field numbers, packed by the
 * code protoc-c generates from it at build time. */
#include "tfevents.h"

#include <chutney.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef CN_HAVE_TENSORBOARD

#include "tfevent.pb-c.h"

#include <fcntl.h>
#include <math.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const bool cn_tfevents_available = true;

struct cn_tfevents {
    FILE *f;
};

/* TFRecord masks its CRCs so that a CRC of data holding CRCs is not
 * weak (the record format's own rule). */
static uint32_t masked_crc(const void *p, size_t n) {
    uint32_t c = cn_crc32c(0, p, n);
    return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

static void put_le(unsigned char *b, uint64_t v, int nbytes) {
    for (int i = 0; i < nbytes; i++) b[i] = (unsigned char)(v >> (8 * i));
}

static double wall_time(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Packs ev and writes it as one record, flushed: 0 or -1 with errno. */
static int write_event(cn_tfevents *w, const CnTb__Event *ev) {
    size_t n = cn_tb__event__get_packed_size(ev);
    unsigned char *data = malloc(n ? n : 1);
    if (!data) return -1;
    cn_tb__event__pack(ev, data);
    unsigned char head[12], tail[4];
    put_le(head, n, 8);
    put_le(head + 8, masked_crc(head, 8), 4);
    put_le(tail, masked_crc(data, n), 4);
    errno = 0;
    bool ok = fwrite(head, 1, 12, w->f) == 12 && fwrite(data, 1, n, w->f) == n &&
              fwrite(tail, 1, 4, w->f) == 4 && fflush(w->f) == 0;
    free(data);
    if (!ok && !errno) errno = EIO;
    return ok ? 0 : -1;
}

/* mkdir -p: every missing directory along path. */
static int make_dirs(const char *path) {
    char buf[4096];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof buf) {
        errno = len ? ENAMETOOLONG : ENOENT;
        return -1;
    }
    memcpy(buf, path, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != '\0') continue;
        char c = buf[i];
        buf[i] = '\0';
        struct stat st;
        if (stat(buf, &st) < 0) {
            if (mkdir(buf, 0777) < 0 && errno != EEXIST) return -1;
        } else if (!S_ISDIR(st.st_mode)) {
            errno = ENOTDIR;
            return -1;
        }
        buf[i] = c;
    }
    return 0;
}

cn_tfevents *cn_tfevents_open(const char *dir, char *path, size_t path_size) {
    if (make_dirs(dir) < 0) return NULL;
    char host[256] = "localhost";
    if (gethostname(host, sizeof host - 1) < 0) snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    char name[4096];
    /* The pid keeps two runs started in the same second apart (PyTorch's
     * writer adds it too); O_EXCL never writes over another run's file. */
    int n = snprintf(name, sizeof name, "%s/events.out.tfevents.%lld.%s.%ld", dir,
                     (long long)time(NULL), host, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof name) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    if (path) snprintf(path, path_size, "%s", name);
    int fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return NULL;
    cn_tfevents *w = calloc(1, sizeof *w);
    if (!w || !(w->f = fdopen(fd, "wb"))) {
        int e = errno;
        free(w);
        close(fd);
        errno = e;
        return NULL;
    }
    CnTb__Event ev = CN_TB__EVENT__INIT;
    ev.wall_time = wall_time();
    ev.what_case = CN_TB__EVENT__WHAT_FILE_VERSION;
    ev.file_version = "brain.Event:2";
    if (write_event(w, &ev) < 0) {
        int e = errno;
        fclose(w->f);
        free(w);
        errno = e;
        return NULL;
    }
    return w;
}

int cn_tfevents_scalars(cn_tfevents *w, int64_t step, const char *const *tags,
                        const double *values, int n) {
    if (!w) {
        errno = EINVAL;
        return -1;
    }
    enum { MAXV = 32 };
    CnTb__SummaryValue vals[MAXV], *ptrs[MAXV];
    int k = 0;
    for (int i = 0; i < n && k < MAXV; i++) {
        if (isnan(values[i])) continue;
        cn_tb__summary_value__init(&vals[k]);
        vals[k].tag = (char *)tags[i]; /* only read by the packer */
        vals[k].value_case = CN_TB__SUMMARY_VALUE__VALUE_SIMPLE_VALUE;
        vals[k].simple_value = (float)values[i];
        ptrs[k] = &vals[k];
        k++;
    }
    if (k == 0) return 0;
    CnTb__Summary sum = CN_TB__SUMMARY__INIT;
    sum.n_value = (size_t)k;
    sum.value = ptrs;
    CnTb__Event ev = CN_TB__EVENT__INIT;
    ev.wall_time = wall_time();
    ev.step = step;
    ev.what_case = CN_TB__EVENT__WHAT_SUMMARY;
    ev.summary = &sum;
    return write_event(w, &ev);
}

int cn_tfevents_close(cn_tfevents *w) {
    if (!w) return 0;
    int rc = fclose(w->f) == 0 ? 0 : -1;
    free(w);
    return rc;
}

#else /* no protobuf-c: the option says so before the run starts */

const bool cn_tfevents_available = false;

cn_tfevents *cn_tfevents_open(const char *dir, char *path, size_t path_size) {
    (void)dir;
    if (path && path_size) path[0] = '\0';
    errno = ENOSYS;
    return NULL;
}

int cn_tfevents_scalars(cn_tfevents *w, int64_t step, const char *const *tags,
                        const double *values, int n) {
    (void)w, (void)step, (void)tags, (void)values, (void)n;
    errno = ENOSYS;
    return -1;
}

int cn_tfevents_close(cn_tfevents *w) {
    (void)w;
    return 0;
}

#endif
