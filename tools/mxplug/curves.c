/* curves.c — training curves of `mxplug train`: --plot FILE.svg draws the
 * training metric, the validation metric and samples/s per epoch as a
 * small self-contained SVG (no script, no external font or style), and
 * --log-json FILE writes one JSON object per epoch, one per line:
 *   {"epoch": 1, "metric": "accuracy", "train": 0.81, "val": 0.84,
 *    "time_s": 12.3, "samples_per_s": 4878}
 * ("val": null without validation).  Both files are rewritten whole and
 * atomically (mxp_file_write_atomic) after every epoch, so a run stopped
 * at any point leaves complete files covering the epochs done.
 * Not here: the loss (mxp_module_fit reports the metric only), training
 * itself, the epoch lines on stdout (progress.c).  The files cover the
 * epochs of this run (a resumed run starts them afresh). */
#include "curves.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

void curves_init(curves *c, const char *svg_path, const char *json_path, const char *title) {
    memset(c, 0, sizeof *c);
    c->svg_path = svg_path;
    c->json_path = json_path;
    c->title = title;
}

void curves_free(curves *c) {
    free(c->pts);
    c->pts = NULL;
    c->n = c->cap = 0;
}

/* A number for JSON: finite values only (null otherwise). */
static void json_num(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, "%.17g", v);
    else fputs("null", f);
}

static int write_json(FILE *f, void *ctx) {
    const curves *c = ctx;
    for (int i = 0; i < c->n; i++) {
        const curve_point *p = &c->pts[i];
        fprintf(f, "{\"epoch\": %d, \"metric\": \"%s\", \"train\": ", p->epoch, c->metric);
        json_num(f, p->train);
        fputs(", \"val\": ", f);
        json_num(f, p->val);
        fputs(", \"time_s\": ", f);
        json_num(f, p->seconds);
        fputs(", \"samples_per_s\": ", f);
        json_num(f, p->samples_per_s);
        fputs("}\n", f);
    }
    return 0;
}

/* ------------------------------------------------------------ SVG */
#define PANEL_W 330.0
#define PANEL_H 200.0
#define LEFT 60.0
#define TOP 52.0
#define GAP 90.0

typedef struct panel {
    double x0, y0;     /* top-left of the plotting area */
    double lo, hi;     /* y range */
    int first, last;   /* epoch range */
} panel;

static double px(const panel *p, double epoch) {
    if (p->last == p->first) return p->x0 + PANEL_W / 2;
    return p->x0 + (epoch - p->first) * PANEL_W / (p->last - p->first);
}

static double py(const panel *p, double v) {
    return p->y0 + PANEL_H - (v - p->lo) * PANEL_H / (p->hi - p->lo);
}

/* A y range around the finite values of one or two series, padded. */
static void y_range(const curves *c, size_t off1, size_t off2, double *lo, double *hi) {
    double a = INFINITY, b = -INFINITY;
    for (int i = 0; i < c->n; i++) {
        const char *base = (const char *)&c->pts[i];
        double v1 = *(const double *)(base + off1), v2 = *(const double *)(base + off2);
        if (isfinite(v1)) a = fmin(a, v1), b = fmax(b, v1);
        if (isfinite(v2)) a = fmin(a, v2), b = fmax(b, v2);
    }
    if (!isfinite(a)) a = 0, b = 1;
    double pad = (b - a) * 0.1;
    if (pad <= 0) pad = fabs(a) * 0.05 + 1e-3;
    *lo = a - pad;
    *hi = b + pad;
}

static void axes(FILE *f, const panel *p, const char *title) {
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" text-anchor=\"middle\">%s</text>\n", p->x0 + PANEL_W / 2,
            p->y0 - 12, title);
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#888\"/>\n", p->x0,
            p->y0, PANEL_W, PANEL_H);
    for (int k = 0; k <= 4; k++) { /* y ticks */
        double v = p->lo + (p->hi - p->lo) * k / 4, y = py(p, v);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", p->x0, y,
                p->x0 + PANEL_W, y);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">", p->x0 - 4, y + 3);
        fprintf(f, fabs(p->hi) >= 1000 ? "%.0f" : "%.4g", v);
        fputs("</text>\n", f);
    }
    int step = (p->last - p->first) / 10 + 1; /* at most ~10 x ticks */
    for (int e = p->first; e <= p->last; e += step)
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\">%d</text>\n", px(p, e),
                p->y0 + PANEL_H + 14, e);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">epoch</text>\n",
            p->x0 + PANEL_W / 2, p->y0 + PANEL_H + 30);
}

/* One series: a polyline through its finite points and a dot at each. */
static void series(FILE *f, const curves *c, const panel *p, size_t off, const char *colour, const char *name) {
    fprintf(f, "<g class=\"series\" id=\"%s\"><polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", name,
            colour);
    for (int i = 0; i < c->n; i++) {
        double v = *(const double *)((const char *)&c->pts[i] + off);
        if (isfinite(v)) fprintf(f, "%.1f,%.1f ", px(p, c->pts[i].epoch), py(p, v));
    }
    fputs("\"/>\n", f);
    for (int i = 0; i < c->n; i++) {
        double v = *(const double *)((const char *)&c->pts[i] + off);
        if (isfinite(v))
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>epoch %d: %.4f</title></circle>\n",
                    px(p, c->pts[i].epoch), py(p, v), colour, c->pts[i].epoch, v);
    }
    fputs("</g>\n", f);
}

static void xml_text(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if ((unsigned char)*s >= 0x20) fputc(*s, f);
    }
}

static int write_svg(FILE *f, void *ctx) {
    const curves *c = ctx;
    double w = LEFT + PANEL_W + GAP + PANEL_W + 30, h = TOP + PANEL_H + 42;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
               "font-family=\"Helvetica, Arial, sans-serif\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            w, h, w, h);
    fputs("<text x=\"10\" y=\"16\" font-size=\"12\" fill=\"#444\">", f);
    xml_text(f, c->title ? c->title : "training");
    fputs("</text>\n", f);
    panel m = {.x0 = LEFT, .y0 = TOP, .first = c->pts[0].epoch, .last = c->pts[c->n - 1].epoch};
    y_range(c, offsetof(curve_point, train), offsetof(curve_point, val), &m.lo, &m.hi);
    axes(f, &m, c->metric);
    series(f, c, &m, offsetof(curve_point, train), "#1f77b4", "train");
    series(f, c, &m, offsetof(curve_point, val), "#d62728", "val");
    /* legend */
    fprintf(f, "<g font-size=\"11\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#1f77b4\" "
               "stroke-width=\"2\"/><text x=\"%.1f\" y=\"%.1f\">train</text>\n",
            m.x0 + 8, m.y0 + 12, m.x0 + 28, m.y0 + 12, m.x0 + 32, m.y0 + 16);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#d62728\" stroke-width=\"2\"/>"
               "<text x=\"%.1f\" y=\"%.1f\">validation</text></g>\n",
            m.x0 + 8, m.y0 + 28, m.x0 + 28, m.y0 + 28, m.x0 + 32, m.y0 + 32);
    panel s = {.x0 = LEFT + PANEL_W + GAP, .y0 = TOP, .first = m.first, .last = m.last};
    y_range(c, offsetof(curve_point, samples_per_s), offsetof(curve_point, samples_per_s), &s.lo, &s.hi);
    s.lo = 0; /* speed from zero: a small wobble is not a slowdown */
    axes(f, &s, "training samples/s");
    series(f, c, &s, offsetof(curve_point, samples_per_s), "#2ca02c", "samples_per_s");
    fputs("</svg>\n", f);
    return 0;
}

int curves_epoch(curves *c, int epoch, const char *metric, double train, double val, double seconds,
                 int64_t samples) {
    if (!c->svg_path && !c->json_path) return 0;
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 16;
        curve_point *p = realloc(c->pts, (size_t)cap * sizeof *p);
        if (!p) {
            cli_err("--plot/--log-json: out of memory");
            return -1;
        }
        c->pts = p;
        c->cap = cap;
    }
    snprintf(c->metric, sizeof c->metric, "%s", metric ? metric : "metric");
    for (char *q = c->metric; *q; q++) /* the name lands in JSON and SVG text */
        if (*q == '"' || *q == '\\' || *q == '<' || *q == '&' || (unsigned char)*q < 0x20) *q = '_';
    c->pts[c->n++] = (curve_point){.epoch = epoch + 1, .train = train, .val = val, .seconds = seconds,
                                   .samples_per_s = seconds > 0 ? (double)samples / seconds : NAN};
    int bad = 0;
    int rc;
    if (c->json_path && (rc = mxp_file_write_atomic(c->json_path, "--log-json file", write_json, c)))
        bad = cli_fail(rc, "writing '%s'", c->json_path);
    if (c->svg_path && (rc = mxp_file_write_atomic(c->svg_path, "--plot file", write_svg, c)))
        bad = cli_fail(rc, "writing '%s'", c->svg_path);
    if (bad) c->failed = 1;
    return bad ? -1 : 0;
}
