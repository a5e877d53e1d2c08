/* viz_plan.c — `mxplug viz NET.json --plan --shape ...`: the executor's
 * memory plan as a picture.  The net is bound for training (simple_bind,
 * gradients for every argument but the given inputs and the labels), the
 * plan read back with mxp_executor_memory_plan_json, and drawn as a
 * self-contained SVG (no Graphviz): one row per storage block, the
 * program's steps left to right (forward, a dashed line, backward), and
 * each planned value a bar on its block's row from the step that writes it
 * to the last step that reads it — values that share a row share bytes.
 * The title gives planned bytes against naive ones (a buffer per value).
 * Not here: the network picture (cmd_viz.c), planning (graph/plan.c). */
#include "viz_plan.h"

#include "cli.h"

#include <jansson.h>
#include <mxplug.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct plan_pic {
    json_t *doc;
    const char *title;
    char shapes[256];
} plan_pic;

static void human(uint64_t b, char *buf, size_t cap) {
    if (b >= (1ull << 20)) snprintf(buf, cap, "%.2f MiB", (double)b / (1 << 20));
    else if (b >= 1024) snprintf(buf, cap, "%.1f KiB", (double)b / 1024);
    else snprintf(buf, cap, "%llu B", (unsigned long long)b);
}

static void xml_text(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

static uint64_t u64_of(json_t *o, const char *k) { return (uint64_t)json_integer_value(json_object_get(o, k)); }

enum { LEFT = 190, TOP = 78, ROW = 24, BAR = 18, BOTTOM = 230, RIGHT = 150 };

static int write_svg(FILE *f, void *ctx) {
    plan_pic *p = ctx;
    json_t *steps = json_object_get(p->doc, "steps"), *blocks = json_object_get(p->doc, "blocks"),
           *values = json_object_get(p->doc, "values");
    int ns = (int)json_array_size(steps), nb = (int)json_array_size(blocks);
    int nfwd = (int)json_integer_value(json_object_get(p->doc, "n_forward_steps"));
    uint64_t planned = u64_of(p->doc, "planned_bytes"), naive = u64_of(p->doc, "naive_bytes");
    double w = ns > 0 ? 900.0 / ns : 20;
    if (w < 14) w = 14;
    if (w > 48) w = 48;
    int width = LEFT + (int)(w * ns + 0.5) + RIGHT, height = TOP + ROW * (nb > 0 ? nb : 1) + BOTTOM;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"Helvetica, Arial, sans-serif\" font-size=\"11\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", width, height, width, height);
    char pb[32], nbs[32];
    human(planned, pb, sizeof pb);
    human(naive, nbs, sizeof nbs);
    fputs("<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">Memory plan of ", f);
    xml_text(f, p->title);
    fputs(" ", f);
    xml_text(f, p->shapes);
    fprintf(f, "</text>\n<text x=\"10\" y=\"42\" font-size=\"12\">planned %s in %d blocks, naive %s (one buffer "
               "per value): %.0f%% less. Bars: a value's lifetime on the block it uses (blue: outputs, orange: "
               "gradients, d(x) is the gradient of x).</text>\n",
            pb, nb, nbs, naive ? 100.0 * (1.0 - (double)planned / (double)naive) : 0.0);
    /* Step grid, the forward/backward split, step names below. */
    for (int s = 0; s < ns; s++) {
        double x = LEFT + s * w;
        fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/>\n", x, TOP - 4, w,
                ROW * nb + 8, s % 2 ? "#f4f4f4" : "#fbfbfb");
        fprintf(f, "<text transform=\"translate(%.1f,%d) rotate(60)\" fill=\"#444\">", x + w / 2 - 3,
                TOP + ROW * nb + 10);
        xml_text(f, json_string_value(json_array_get(steps, (size_t)s)));
        fputs("</text>\n", f);
    }
    if (nfwd > 0 && nfwd < ns)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#888\" stroke-dasharray=\"4,3\"/>\n"
                   "<text x=\"%.1f\" y=\"%d\" fill=\"#666\">forward</text><text x=\"%.1f\" y=\"%d\" "
                   "fill=\"#666\">backward</text>\n",
                LEFT + nfwd * w, TOP - 14, LEFT + nfwd * w, TOP + ROW * nb + 4, LEFT + 2.0, TOP - 8,
                LEFT + nfwd * w + 4, TOP - 8);
    for (int b = 0; b < nb; b++) {
        json_t *bl = json_array_get(blocks, (size_t)b);
        char hb[32];
        human(u64_of(bl, "bytes"), hb, sizeof hb);
        fprintf(f, "<text x=\"10\" y=\"%d\">block %d: %s %s</text>\n", TOP + ROW * b + 13, b, hb,
                json_string_value(json_object_get(bl, "dtype")));
    }
    size_t i;
    json_t *v;
    json_array_foreach(values, i, v) {
        int b = (int)json_integer_value(json_object_get(v, "block"));
        int lo = (int)json_integer_value(json_object_get(v, "first")), hi = (int)json_integer_value(json_object_get(v, "last"));
        const char *name = json_string_value(json_object_get(v, "name"));
        int grad = !strcmp(json_string_value(json_object_get(v, "kind")), "grad");
        double x = LEFT + lo * w + 1, bw = (hi - lo + 1) * w - 2;
        int y = TOP + ROW * b;
        char hb[32];
        human(u64_of(v, "bytes"), hb, sizeof hb);
        fprintf(f, "<g><title>");
        xml_text(f, name);
        fprintf(f, ": %s, block %d, steps %d..%d</title>\n<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" "
                   "rx=\"3\" fill=\"%s\" stroke=\"#333\" stroke-width=\"0.5\"/>\n", hb, b, lo, hi, x, y, bw, BAR,
                grad ? "#fdae6b" : "#9ecae1");
        /* The name inside the bar when it fits (about 6 px per character). */
        size_t fit = bw > 8 ? (size_t)((bw - 6) / 6.2) : 0;
        if (fit >= 4) {
            /* Short labels: "conv1" for conv1_output, "d(conv1)" for its
             * gradient; the tooltip has the full name. */
            char lab[96];
            const char *base = grad && !strncmp(name, "grad of ", 8) ? name + 8 : name;
            size_t bl = strlen(base);
            if (bl > 7 && !strcmp(base + bl - 7, "_output")) bl -= 7;
            if (bl > 80) bl = 80;
            snprintf(lab, sizeof lab, grad ? "d(%.*s)" : "%.*s", (int)bl, base);
            if (strlen(lab) > fit) {
                if (fit > sizeof lab - 1) fit = sizeof lab - 1;
                lab[fit - 1] = '.';
                lab[fit] = '\0';
            }
            fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"10\">", x + 3, y + 13);
            xml_text(f, lab);
            fputs("</text>\n", f);
        }
        fputs("</g>\n", f);
    }
    fputs("</svg>\n", f);
    return MXP_OK;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

int viz_plan(const char *net, int n_shapes, const char *const *names, const mxp_shape *shapes, const char *out) {
    if (n_shapes == 0)
        return cli_usage_error("viz", "--plan binds the network: give the input shapes, e.g. --shape data=64,1,28,28");
    if (out && !ends_with(out, ".svg")) return cli_usage_error("viz", "--plan draws an SVG: -o '%s' must end in .svg", out);
    mxp_symbol *sym = NULL;
    int rc = mxp_symbol_load_file(net, &sym);
    if (rc) return cli_fail(rc, "loading '%s'", net);
    /* No gradient for the given inputs and the labels, as training binds. */
    int na = 0;
    const char *const *args = NULL;
    const char *no_grad[64];
    int n_no = 0;
    if ((rc = mxp_symbol_list_arguments(sym, &na, &args))) {
        mxp_symbol_release(sym);
        return cli_fail(rc, "'%s': listing arguments", net);
    }
    for (int k = 0; k < n_shapes && n_no < 64; k++) no_grad[n_no++] = names[k];
    for (int k = 0; k < na && n_no < 64; k++)
        if (ends_with(args[k], "label")) no_grad[n_no++] = args[k];
    mxp_executor *ex = NULL;
    rc = mxp_executor_simple_bind(sym, (mxp_device){MXP_DEV_CPU, 0}, n_shapes, names, shapes, MXP_REQ_WRITE, n_no,
                                  no_grad, &ex);
    if (rc) {
        mxp_symbol_release(sym);
        return cli_fail(rc, "'%s': binding for training", net);
    }
    char *text = NULL;
    rc = mxp_executor_memory_plan_json(ex, &text);
    mxp_executor_free(ex);
    mxp_symbol_release(sym);
    if (rc) return cli_fail(rc, "'%s': reading the memory plan", net);
    json_error_t jerr;
    plan_pic p = {.doc = json_loads(text, 0, &jerr)};
    mxp_free(text);
    if (!p.doc) {
        cli_err("viz: the memory plan's JSON does not parse: %s", jerr.text);
        return CLI_FAIL;
    }
    const char *slash = strrchr(net, '/');
    p.title = slash ? slash + 1 : net;
    size_t len = 0;
    for (int k = 0; k < n_shapes && len < sizeof p.shapes - 64; k++) {
        len += (size_t)snprintf(p.shapes + len, sizeof p.shapes - len, "%s%s=", k ? " " : "(", names[k]);
        for (int d = 0; d < shapes[k].ndim && len < sizeof p.shapes - 24; d++)
            len += (size_t)snprintf(p.shapes + len, sizeof p.shapes - len, d ? ",%lld" : "%lld",
                                    (long long)shapes[k].dims[d]);
    }
    if (len && len < sizeof p.shapes - 2) snprintf(p.shapes + len, sizeof p.shapes - len, ")");
    uint64_t planned = u64_of(p.doc, "planned_bytes"), naive = u64_of(p.doc, "naive_bytes");
    int st = CLI_OK;
    if (!out) {
        write_svg(stdout, &p);
        if (fflush(stdout)) st = CLI_FAIL;
    } else {
        rc = mxp_file_write_atomic(out, "memory plan picture", write_svg, &p);
        if (rc) st = cli_fail(rc, "writing '%s'", out);
        else
            printf("viz: %s: planned %llu bytes in %zu blocks, naive %llu bytes (%.0f%% less)\n", out,
                    (unsigned long long)planned, json_array_size(json_object_get(p.doc, "blocks")),
                    (unsigned long long)naive, naive ? 100.0 * (1.0 - (double)planned / (double)naive) : 0.0);
    }
    json_decref(p.doc);
    return st;
}
