/* detect.h — box helpers of detect.c shared with the other detection ops
 * (multibox.c): IoU of corner-encoded boxes, float-tuple parameters.  Only
 * declarations; the ops themselves register through nn_common.h. */
#ifndef NN_DETECT_H
#define NN_DETECT_H

#include "nn_dense.h"

/* IoU of two [xmin, ymin, xmax, ymax] boxes, no "+1" on widths (MXNet's
 * box ops); 0 when they do not overlap or the union is not positive. */
double nn_box_iou_corner(const double *a, const double *b);
/* "(0.5, 0.25)" / "[1,2]" / "1.5" (Python 2 "L" suffixes allowed) into
 * v[0..cap); returns the count, or -1 when s is not such a tuple or holds
 * more than cap values. */
int nn_parse_floats(const char *s, double *v, int cap);

#endif
