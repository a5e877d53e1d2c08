/* viz_plan.h — `mxplug viz --plan` (viz_plan.c): the memory plan as an SVG. */
#ifndef MXP_TOOLS_VIZ_PLAN_H
#define MXP_TOOLS_VIZ_PLAN_H

#include <mxplug.h>

/* Bind `net` for training with the given input shapes and draw its memory
 * plan to `out` (.svg) or stdout.  Returns a CLI_* status. */
int viz_plan(const char *net, int n_shapes, const char *const *names, const mxp_shape *shapes, const char *out);

#endif /* MXP_TOOLS_VIZ_PLAN_H */
