/* Reader of the fixture file tests/parity/torch_optim.py writes (CTest's
 * optim_fixtures test; the path comes in CN_OPTIM_FILE):
 *   optim NAME STEPS        then STEPS lines of the 10 values of p and q
 *   sched NAME N v0 .. vN-1 the lr after creation and after each step */
#ifndef CN_TEST_OPTIM_FIXTURE_H
#define CN_TEST_OPTIM_FIXTURE_H

#include "harness.h"

#define FX_STEPS 10
#define FX_VALUES 10 /* p [4] and q [2, 3] */
#define FX_MAX 64

typedef struct fx_traj {
    char name[64];
    double v[FX_STEPS][FX_VALUES];
} fx_traj;

typedef struct fx_lrs {
    char name[64];
    int n;
    double v[FX_MAX];
} fx_lrs;

static fx_traj fx_trajs[FX_MAX];
static fx_lrs fx_scheds[FX_MAX];
static int fx_ntraj, fx_nsched;

/* Reads the file once; false (after a failed CHECK) if it is missing or
 * malformed. */
static inline bool fx_load(void) {
    static int loaded = 0;
    if (loaded) return loaded > 0;
    loaded = -1;
    const char *path = getenv("CN_OPTIM_FILE");
    CHECK_MSG(path != NULL, "CN_OPTIM_FILE is not set (CTest's optim_fixtures test writes it)");
    if (!path) return false;
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "cannot open %s", path);
    if (!f) return false;
    char kind[16], name[64];
    int n;
    bool ok = true;
    while (ok && fscanf(f, " %15s %63s %d", kind, name, &n) == 3) {
        if (!strcmp(kind, "optim") && n == FX_STEPS && fx_ntraj < FX_MAX) {
            fx_traj *t = &fx_trajs[fx_ntraj++];
            snprintf(t->name, sizeof t->name, "%s", name);
            for (int s = 0; s < FX_STEPS && ok; s++)
                for (int k = 0; k < FX_VALUES && ok; k++) ok = fscanf(f, "%lf", &t->v[s][k]) == 1;
        } else if (!strcmp(kind, "sched") && n <= FX_MAX && fx_nsched < FX_MAX) {
            fx_lrs *l = &fx_scheds[fx_nsched++];
            snprintf(l->name, sizeof l->name, "%s", name);
            l->n = n;
            for (int k = 0; k < n && ok; k++) ok = fscanf(f, "%lf", &l->v[k]) == 1;
        } else {
            ok = false;
        }
    }
    ok = ok && feof(f);
    fclose(f);
    CHECK_MSG(ok, "fixture file %s is malformed", path);
    loaded = ok ? 1 : -1;
    return ok;
}

static inline const fx_traj *fx_traj_find(const char *name) {
    for (int i = 0; i < fx_ntraj; i++)
        if (!strcmp(fx_trajs[i].name, name)) return &fx_trajs[i];
    return NULL;
}

static inline const fx_lrs *fx_sched_find(const char *name) {
    for (int i = 0; i < fx_nsched; i++)
        if (!strcmp(fx_scheds[i].name, name)) return &fx_scheds[i];
    return NULL;
}

#endif
