/* schedule.c — learning-rate schedules (mx.lr_scheduler FactorScheduler
 * and MultiFactorScheduler) as pure functions of num_update: MXNet's
 * objects keep a running count, but their result depends only on
 * num_update when it never decreases, which is what training does; a pure
 * function lets a resumed run continue without saving scheduler state.
 * The base lr is multiplied step by step, as MXNet does (not pow), so the
 * doubles match. */
#include "train/train.h"

#include <stdlib.h>
#include <string.h>

struct mxp_lr_schedule {
    int multi;
    int64_t step;            /* factor                                   */
    double factor;
    double stop_factor_lr;   /* factor                                   */
    int64_t *steps;          /* multi-factor, increasing                 */
    int n_steps;
};

int mxp_lr_schedule_factor(int64_t step, double factor, double stop_factor_lr, mxp_lr_schedule **out) {
    if (!out) return mxp__error(MXP_EINVAL, "mxp_lr_schedule_factor: out is NULL");
    *out = NULL;
    if (step < 1) return mxp__error(MXP_EINVAL, "FactorScheduler: step %lld must be >= 1", (long long)step);
    if (factor > 1.0) return mxp__error(MXP_EINVAL, "FactorScheduler: factor %g must be <= 1 to decrease lr", factor);
    mxp_lr_schedule *s = calloc(1, sizeof *s);
    if (!s) return mxp__error_oom("lr schedule");
    s->step = step;
    s->factor = factor;
    s->stop_factor_lr = stop_factor_lr;
    *out = s;
    return MXP_OK;
}

int mxp_lr_schedule_multi_factor(int n_steps, const int64_t *steps, double factor, mxp_lr_schedule **out) {
    if (!out) return mxp__error(MXP_EINVAL, "mxp_lr_schedule_multi_factor: out is NULL");
    *out = NULL;
    if (n_steps < 1 || !steps) return mxp__error(MXP_EINVAL, "MultiFactorScheduler: needs at least one step");
    for (int i = 0; i < n_steps; i++) {
        if (steps[i] < 1)
            return mxp__error(MXP_EINVAL, "MultiFactorScheduler: step %lld must be >= 1", (long long)steps[i]);
        if (i && steps[i] <= steps[i - 1])
            return mxp__error(MXP_EINVAL, "MultiFactorScheduler: steps must be increasing (%lld after %lld)",
                              (long long)steps[i], (long long)steps[i - 1]);
    }
    if (factor > 1.0) return mxp__error(MXP_EINVAL, "MultiFactorScheduler: factor %g must be <= 1", factor);
    mxp_lr_schedule *s = calloc(1, sizeof *s);
    if (!s || !(s->steps = malloc((size_t)n_steps * sizeof *s->steps))) {
        free(s);
        return mxp__error_oom("lr schedule");
    }
    s->multi = 1;
    memcpy(s->steps, steps, (size_t)n_steps * sizeof *steps);
    s->n_steps = n_steps;
    s->factor = factor;
    *out = s;
    return MXP_OK;
}

double mxp_lr_schedule_lr(const mxp_lr_schedule *s, double base_lr, int64_t num_update) {
    if (!s) return base_lr;
    double lr = base_lr;
    if (s->multi) {
        for (int i = 0; i < s->n_steps && num_update > s->steps[i]; i++) lr *= s->factor;
        return lr;
    }
    /* MXNet: while num_update > count + step: count += step; lr *= factor;
     * clamped to stop_factor_lr. */
    for (int64_t count = 0; num_update > count + s->step; count += s->step) {
        lr *= s->factor;
        if (lr < s->stop_factor_lr) {
            lr = s->stop_factor_lr;
            break; /* stays clamped: every later step clamps again */
        }
    }
    return lr;
}

void mxp_lr_schedule_free(mxp_lr_schedule *s) {
    if (!s) return;
    free(s->steps);
    free(s);
}
