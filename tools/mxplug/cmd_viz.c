/* cmd_viz.c — `mxplug viz NET.json`: draw a symbol graph the way MXNet's
 * plot_network does: one box per op, coloured by kind of op and labelled
 * with the op and its main parameters (kernel/stride, num_filter,
 * num_hidden, act_type, pool_type), edges labelled with the shapes shape
 * inference gives (batch dimension left out, as MXNet does, except on
 * learned variables, which have none), weights,
 * biases and other learned variables hidden unless --show-params.
 *
 * The graph is read only through the public API: the symbol is loaded (so
 * legacy files and unknown ops are handled and reported by the runtime),
 * saved back as current-layout JSON for its structure, and the shape of
 * every node output comes from inferring the shapes of its internals.
 * The DOT text is written here; pictures (.svg, .png, .pdf) are made by
 * running Graphviz's `dot` as a child process (see render_with_dot).
 * Not here: layout (dot's job), parameters' values, training curves
 * (curves.c).  Every output file is written atomically
 * (mxp_file_write_atomic): a failed render leaves no partial picture. */
#include "cli.h"
#include "viz_plan.h"

#include <jansson.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define VIZ_MAX_SHAPES 16

static void usage(FILE *f) {
    fprintf(f,
            "usage: mxplug viz NET.json [--shape NAME=D1,D2,...]... [-o FILE] [--show-params]\n"
            "       mxplug viz NET.json --plan --shape NAME=D1,D2,... [-o FILE.svg]\n"
            "\n"
            "Draw the network NET.json (MXNet symbol JSON) as MXNet's plot_network does:\n"
            "one box per op, edges labelled with inferred shapes (without the batch dim).\n"
            "\n"
            "  --shape NAME=DIMS  shape of an input, e.g. --shape data=1,1,28,28 (repeatable);\n"
            "                     without it, edges are labelled only where shapes are known\n"
            "  -o FILE            FILE.dot: the DOT text; FILE.svg, FILE.png, FILE.pdf: a picture\n"
            "                     drawn by Graphviz's 'dot' (Debian package graphviz).\n"
            "                     Without -o the DOT text goes to stdout.\n"
            "  --show-params      also draw weights, biases and other learned variables\n"
            "  --plan             draw the executor's memory plan instead (bound for training\n"
            "                     with the --shape inputs): storage blocks over the steps,\n"
            "                     planned vs naive bytes; an SVG written by mxplug\n"
            "\n"
            "Without Graphviz, a picture cannot be drawn: the DOT text is written beside it\n"
            "(FILE.dot) and the command exits 1, saying so.\n");
}

/* ------------------------------------------------------------ options */
typedef struct viz_opts {
    const char *net, *out;
    int show_params, plan;
    int n_shapes;
    const char *shape_names[VIZ_MAX_SHAPES];
    char shape_name_buf[VIZ_MAX_SHAPES][128];
    mxp_shape shapes[VIZ_MAX_SHAPES];
} viz_opts;

/* "data=1,1,28,28" (parentheses allowed: "data=(1,1,28,28)"). */
static int parse_shape(const char *arg, viz_opts *o) {
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || (size_t)(eq - arg) >= sizeof o->shape_name_buf[0])
        return cli_usage_error("viz", "--shape '%s': expected NAME=D1,D2,... (e.g. data=1,1,28,28)", arg);
    if (o->n_shapes == VIZ_MAX_SHAPES) return cli_usage_error("viz", "more than %d --shape options", VIZ_MAX_SHAPES);
    int k = o->n_shapes;
    snprintf(o->shape_name_buf[k], sizeof o->shape_name_buf[k], "%.*s", (int)(eq - arg), arg);
    mxp_shape *s = &o->shapes[k];
    memset(s, 0, sizeof *s);
    const char *p = eq + 1;
    if (*p == '(') p++;
    while (*p && *p != ')') {
        char *end;
        errno = 0;
        long long d = strtoll(p, &end, 10);
        if (end == p || errno || d < 1 || d > (1LL << 40))
            return cli_usage_error("viz", "--shape '%s': dimension %d is not a positive integer", arg, s->ndim + 1);
        if (s->ndim == MXP_MAX_NDIM)
            return cli_usage_error("viz", "--shape '%s': more than %d dimensions", arg, MXP_MAX_NDIM);
        s->dims[s->ndim++] = d;
        p = end;
        while (*p == ' ') p++;
        if (*p == ',') p++;
        else if (*p && *p != ')') return cli_usage_error("viz", "--shape '%s': unexpected '%c'", arg, *p);
    }
    if (s->ndim == 0) return cli_usage_error("viz", "--shape '%s': no dimensions", arg);
    o->shape_names[k] = o->shape_name_buf[k];
    o->n_shapes++;
    return CLI_OK;
}

static int parse_args(int argc, char **argv, viz_opts *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            usage(stdout);
            return -1;
        } else if (strcmp(a, "--show-params") == 0) {
            o->show_params = 1;
        } else if (strcmp(a, "--plan") == 0) {
            o->plan = 1;
        } else if (strcmp(a, "--shape") == 0 || strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
            if (i + 1 >= argc) return cli_usage_error("viz", "%s needs a value", a);
            const char *v = argv[++i];
            if (strcmp(a, "--shape") == 0) {
                int rc = parse_shape(v, o);
                if (rc) return rc;
            } else {
                o->out = v;
            }
        } else if (a[0] == '-' && a[1]) {
            return cli_usage_error("viz", "unknown option '%s'", a);
        } else if (!o->net) {
            o->net = a;
        } else {
            return cli_usage_error("viz", "unexpected argument '%s'", a);
        }
    }
    if (!o->net) return cli_usage_error("viz", "missing NET.json");
    return CLI_OK;
}

/* ------------------------------------------------------------ the graph */
typedef struct viz_node {
    const char *op, *name;   /* owned by the JSON document */
    json_t *attrs, *inputs;  /* borrowed; attrs may be NULL */
    int hidden;              /* a learned variable not drawn */
    int first_out, n_out;    /* its outputs in the internals' output shapes */
} viz_node;

typedef struct viz_graph {
    json_t *doc;
    viz_node *nodes;
    int n_nodes;
    mxp_shape *out_shapes; /* of the internals, in their list_outputs order */
    int n_out_shapes;
} viz_graph;

static void graph_free(viz_graph *g) {
    json_decref(g->doc);
    free(g->nodes);
    mxp_free(g->out_shapes);
    memset(g, 0, sizeof *g);
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The variables MXNet's plot_network hides by default: learned ones. */
static int is_learned_variable(const char *name) {
    static const char *const suffixes[] = {"_weight", "_bias", "_gamma", "_beta", "_moving_mean",
                                           "_moving_var", "_running_mean", "_running_var"};
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++)
        if (ends_with(name, suffixes[i])) return 1;
    return 0;
}

/* Structure from the runtime's own JSON of the loaded symbol (current
 * layout whatever the file's age); shapes from inference on its internals,
 * whose outputs are grouped by node (topological order, a node's outputs
 * consecutive), which is how they are matched to the JSON's nodes. */
static int graph_build(mxp_symbol *sym, const viz_opts *o, viz_graph *g) {
    char *text = NULL;
    int rc = mxp_symbol_save_json(sym, &text);
    if (rc) return cli_fail(rc, "'%s': writing its JSON", o->net);
    json_error_t jerr;
    g->doc = json_loads(text, 0, &jerr);
    mxp_free(text);
    json_t *nodes = g->doc ? json_object_get(g->doc, "nodes") : NULL;
    if (!json_is_array(nodes)) {
        cli_err("'%s': the runtime's JSON of the net has no node list (%s)", o->net, g->doc ? "no 'nodes'" : jerr.text);
        return CLI_FAIL;
    }
    g->n_nodes = (int)json_array_size(nodes);
    g->nodes = calloc((size_t)g->n_nodes + 1, sizeof *g->nodes);
    if (!g->nodes) {
        cli_err("out of memory");
        return CLI_FAIL;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        json_t *n = json_array_get(nodes, (size_t)i);
        viz_node *v = &g->nodes[i];
        v->op = json_string_value(json_object_get(n, "op"));
        v->name = json_string_value(json_object_get(n, "name"));
        v->attrs = json_object_get(n, "attrs");
        v->inputs = json_object_get(n, "inputs");
        v->first_out = -1;
        if (!v->op || !v->name || !json_is_array(v->inputs)) {
            cli_err("'%s': node %d of the runtime's JSON lacks op, name or inputs", o->net, i);
            return CLI_FAIL;
        }
        v->hidden = !o->show_params && strcmp(v->op, "null") == 0 && is_learned_variable(v->name);
    }

    mxp_symbol *internals = NULL;
    rc = mxp_symbol_internals(sym, &internals);
    int complete = 0;
    if (rc == MXP_OK)
        rc = mxp_symbol_infer_shape(internals, o->n_shapes, o->shape_names, o->shapes, NULL, NULL, &g->n_out_shapes,
                                    &g->out_shapes, NULL, NULL, &complete);
    if (rc) {
        mxp_symbol_release(internals);
        return cli_fail(rc, "'%s': inferring shapes", o->net);
    }
    int cur = -1;
    for (int k = 0; k < g->n_out_shapes && rc == MXP_OK; k++) {
        mxp_symbol *out = NULL;
        rc = mxp_symbol_output(internals, k, &out);
        const char *name = out ? mxp_symbol_name(out) : NULL;
        if (rc == MXP_OK && name) {
            if (cur < 0 || strcmp(g->nodes[cur].name, name) != 0) {
                int next = -1; /* the first node of that name not matched yet */
                for (int i = cur + 1; i < g->n_nodes && next < 0; i++)
                    if (g->nodes[i].first_out < 0 && strcmp(g->nodes[i].name, name) == 0) next = i;
                for (int i = 0; i <= cur && next < 0; i++)
                    if (g->nodes[i].first_out < 0 && strcmp(g->nodes[i].name, name) == 0) next = i;
                cur = next;
                if (cur >= 0) g->nodes[cur].first_out = k;
            }
            if (cur >= 0) g->nodes[cur].n_out++;
        }
        mxp_symbol_release(out);
    }
    mxp_symbol_release(internals);
    if (rc) return cli_fail(rc, "'%s': listing its outputs", o->net);
    return CLI_OK;
}

/* ------------------------------------------------------------ DOT text */
static const char *attr(const viz_node *v, const char *key) {
    return v->attrs ? json_string_value(json_object_get(v->attrs, key)) : NULL;
}

/* "(5, 5)" -> "5x5"; NULL -> dflt. */
static void tuple_x(const char *s, const char *dflt, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    if (!s) {
        snprintf(buf, cap, "%s", dflt);
        return;
    }
    for (const char *p = s; *p && n + 2 < cap; p++) {
        if (*p >= '0' && *p <= '9') buf[n++] = *p;
        else if (*p == ',' && n && buf[n - 1] != 'x') buf[n++] = 'x';
    }
    if (n && buf[n - 1] == 'x') n--;
    buf[n] = 0;
}

/* Fill colours of MXNet's plot_network (a ColorBrewer Set3 palette). */
static const char *colour_of(const char *op) {
    if (strcmp(op, "null") == 0) return "#8dd3c7";
    if (!strcmp(op, "Convolution") || !strcmp(op, "Deconvolution") || !strcmp(op, "FullyConnected")) return "#fb8072";
    if (!strcmp(op, "Activation") || !strcmp(op, "LeakyReLU") || !strcmp(op, "relu") || !strcmp(op, "sigmoid") ||
        !strcmp(op, "tanh"))
        return "#ffffb3";
    if (!strcmp(op, "BatchNorm") || !strcmp(op, "LayerNorm") || !strcmp(op, "InstanceNorm")) return "#bebada";
    if (!strcmp(op, "Pooling")) return "#80b1d3";
    if (!strcmp(op, "Concat") || !strcmp(op, "Flatten") || !strcmp(op, "Reshape") || !strcmp(op, "reshape") ||
        !strcmp(op, "flatten") || !strcmp(op, "concat"))
        return "#fdb462";
    if (strstr(op, "Softmax") || strstr(op, "softmax") || strstr(op, "RegressionOutput") || !strcmp(op, "MakeLoss"))
        return "#b3de69";
    return "#fccde5";
}

/* The label, as plot_network writes it (a literal "\n" is DOT's newline). */
static void label_of(const viz_node *v, char *buf, size_t cap) {
    char k[64], s[64];
    const char *op = v->op;
    if (strcmp(op, "null") == 0) {
        snprintf(buf, cap, "%s", v->name);
    } else if (!strcmp(op, "Convolution") || !strcmp(op, "Deconvolution")) {
        tuple_x(attr(v, "kernel"), "?", k, sizeof k);
        tuple_x(attr(v, "stride"), "1", s, sizeof s);
        const char *nf = attr(v, "num_filter");
        snprintf(buf, cap, "%s\\n%s/%s, %s", op, k, s, nf ? nf : "?");
    } else if (!strcmp(op, "FullyConnected")) {
        const char *nh = attr(v, "num_hidden");
        snprintf(buf, cap, "%s\\n%s", op, nh ? nh : "?");
    } else if (!strcmp(op, "Activation") || !strcmp(op, "LeakyReLU")) {
        const char *at = attr(v, "act_type");
        snprintf(buf, cap, "%s\\n%s", op, at ? at : (!strcmp(op, "LeakyReLU") ? "leaky" : "?"));
    } else if (!strcmp(op, "Pooling")) {
        const char *pt = attr(v, "pool_type");
        const char *gp = attr(v, "global_pool");
        if (gp && (!strcmp(gp, "True") || !strcmp(gp, "true") || !strcmp(gp, "1"))) {
            snprintf(buf, cap, "%s\\nglobal %s", op, pt ? pt : "max");
        } else {
            tuple_x(attr(v, "kernel"), "?", k, sizeof k);
            tuple_x(attr(v, "stride"), "1", s, sizeof s);
            snprintf(buf, cap, "%s\\n%s, %s/%s", op, pt ? pt : "max", k, s);
        }
    } else {
        snprintf(buf, cap, "%s", op);
    }
}

/* A DOT double-quoted string: quotes and backslashes other than the \n
 * the labels use are escaped (names come from the user's file). */
static void put_quoted(FILE *f, const char *s, int keep_newlines) {
    fputc('"', f);
    for (; *s; s++) {
        if (keep_newlines && s[0] == '\\' && s[1] == 'n') {
            fputs("\\n", f);
            s++;
        } else if (*s == '"' || *s == '\\') {
            fputc('\\', f);
            fputc(*s, f);
        } else if ((unsigned char)*s >= 0x20) {
            fputc(*s, f);
        }
    }
    fputc('"', f);
}

/* "20x24x24": the dims after the batch (from = 1) or all of them (a
 * learned variable has no batch dimension: from = 0); "" when unknown or
 * nothing is left. */
static void shape_label(const mxp_shape *s, int from, char *buf, size_t cap) {
    buf[0] = 0;
    if (s->ndim <= from) return;
    for (int d = 0; d < s->ndim; d++)
        if (s->dims[d] <= 0) return;
    size_t n = 0;
    for (int d = from; d < s->ndim && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", d > from ? "x" : "", (long long)s->dims[d]);
}

typedef struct viz_dot {
    const viz_graph *g;
    const char *title;
} viz_dot;

/* Data flows upwards (rankdir=BT), inputs at the bottom, as in MXNet's
 * pictures. */
static int write_dot(FILE *f, void *ctx) {
    const viz_dot *d = ctx;
    const viz_graph *g = d->g;
    fputs("digraph plot {\n", f);
    fputs("  label=", f);
    put_quoted(f, d->title, 0);
    fputs(";\n  labelloc=t; fontname=\"Helvetica\"; fontsize=12; rankdir=BT; nodesep=0.3; ranksep=0.35;\n", f);
    fputs("  node [shape=box, style=\"rounded,filled\", fixedsize=false, width=1.3, height=0.6, "
          "fontname=\"Helvetica\", fontsize=11, color=\"#555555\", penwidth=0.8];\n",
          f);
    fputs("  edge [fontname=\"Helvetica\", fontsize=9, color=\"#555555\", arrowsize=0.7];\n", f);
    char label[256];
    for (int i = 0; i < g->n_nodes; i++) {
        const viz_node *v = &g->nodes[i];
        if (v->hidden) continue;
        label_of(v, label, sizeof label);
        fprintf(f, "  n%d [label=", i);
        put_quoted(f, label, 1);
        fprintf(f, ", fillcolor=\"%s\"", colour_of(v->op));
        if (strcmp(v->op, "null") == 0) fputs(", shape=oval", f);
        fputs(", tooltip=", f);
        put_quoted(f, v->name, 0);
        fputs("];\n", f);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const viz_node *v = &g->nodes[i];
        if (strcmp(v->op, "null") == 0) continue;
        for (size_t e = 0; e < json_array_size(v->inputs); e++) {
            json_t *in = json_array_get(v->inputs, e);
            json_int_t src = json_integer_value(json_array_get(in, 0));
            json_int_t idx = json_integer_value(json_array_get(in, 1));
            if (src < 0 || src >= g->n_nodes || g->nodes[src].hidden) continue;
            const viz_node *s = &g->nodes[src];
            label[0] = 0;
            if (s->first_out >= 0 && idx >= 0 && idx < s->n_out && s->first_out + idx < g->n_out_shapes)
                shape_label(&g->out_shapes[s->first_out + idx],
                            strcmp(s->op, "null") == 0 && is_learned_variable(s->name) ? 0 : 1, label, sizeof label);
            fprintf(f, "  n%lld -> n%d", (long long)src, i);
            if (label[0]) fprintf(f, " [label=\" %s\"]", label);
            fputs(";\n", f);
        }
    }
    fputs("}\n", f);
    return MXP_OK;
}

/* ------------------------------------------------------------ rendering */
/* Graphviz's `dot` runs as a child process (fork/exec) rather than through
 * libgvc: the runtime and the CLI then have no link-time dependency on
 * Graphviz, and a machine without it still gets the DOT text (with a clear
 * message) instead of a tool that does not start. */
typedef struct viz_render {
    viz_dot dot;
    const char *format;  /* "svg", "png", "pdf" */
    int not_found;       /* exec of `dot` failed with ENOENT */
    int exec_errno;      /* any other exec failure */
    int dot_status;      /* wait status of `dot` */
} viz_render;

static int write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* mxp_file_write_atomic writer: dot reads the DOT text on a pipe and
 * writes the picture straight into the temporary file. */
static int render_with_dot(FILE *f, void *ctx) {
    viz_render *r = ctx;
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem) {
        cli_err("out of memory");
        return MXP_ENOMEM;
    }
    write_dot(mem, &r->dot);
    if (fclose(mem) != 0) {
        free(text);
        cli_err("out of memory");
        return MXP_ENOMEM;
    }
    fflush(f);
    int in[2], status_pipe[2];
    if (pipe(in) != 0) {
        free(text);
        cli_err("pipe: %s", strerror(errno));
        return MXP_EIO;
    }
    if (pipe(status_pipe) != 0) {
        close(in[0]);
        close(in[1]);
        free(text);
        cli_err("pipe: %s", strerror(errno));
        return MXP_EIO;
    }
    fcntl(in[1], F_SETFD, FD_CLOEXEC);
    fcntl(status_pipe[0], F_SETFD, FD_CLOEXEC);
    fcntl(status_pipe[1], F_SETFD, FD_CLOEXEC); /* closed by a successful exec */
    char fmt[16];
    snprintf(fmt, sizeof fmt, "-T%s", r->format);
    pid_t pid = fork();
    if (pid == 0) {
        if (dup2(in[0], 0) < 0 || dup2(fileno(f), 1) < 0) _exit(126);
        char *args[] = {"dot", fmt, NULL};
        execvp("dot", args);
        int e = errno;
        (void)!write(status_pipe[1], &e, sizeof e);
        _exit(127);
    }
    int fork_errno = errno;
    close(in[0]);
    close(status_pipe[1]);
    if (pid < 0) {
        close(in[1]);
        close(status_pipe[0]);
        free(text);
        cli_err("cannot start 'dot': fork: %s", strerror(fork_errno));
        return MXP_EIO;
    }
    /* dot may exit before reading everything (bad input, exec failure):
     * the write then fails with EPIPE instead of killing this process. */
    struct sigaction ign = {.sa_handler = SIG_IGN}, old;
    sigemptyset(&ign.sa_mask);
    sigaction(SIGPIPE, &ign, &old);
    (void)write_all(in[1], text, len);
    close(in[1]);
    sigaction(SIGPIPE, &old, NULL);
    free(text);
    int e = 0;
    ssize_t got;
    while ((got = read(status_pipe[0], &e, sizeof e)) < 0 && errno == EINTR) {}
    close(status_pipe[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    r->dot_status = st;
    if (got == (ssize_t)sizeof e) {
        if (e == ENOENT) r->not_found = 1;
        else r->exec_errno = e;
        return MXP_ENOENT;
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) return MXP_EIO;
    return MXP_OK;
}

/* "net.svg" -> "svg"; NULL when the name has no extension. */
static const char *extension(const char *path) {
    const char *slash = strrchr(path, '/');
    const char *dot = strrchr(path, '.');
    if (!dot || (slash && dot < slash) || dot == path || dot[-1] == '/') return NULL;
    return dot + 1;
}

int cmd_viz(int argc, char **argv) {
    viz_opts o;
    memset(&o, 0, sizeof o);
    int prc = parse_args(argc, argv, &o);
    if (prc < 0) return CLI_OK;
    if (prc) return prc;

    if (o.plan) return viz_plan(o.net, o.n_shapes, o.shape_names, o.shapes, o.out);
    const char *ext = o.out ? extension(o.out) : NULL;
    int render = 0;
    if (o.out) {
        if (ext && strcmp(ext, "dot") == 0) render = 0;
        else if (ext && (!strcmp(ext, "svg") || !strcmp(ext, "png") || !strcmp(ext, "pdf"))) render = 1;
        else return cli_usage_error("viz", "-o '%s': the name must end in .dot, .svg, .png or .pdf", o.out);
    }

    mxp_symbol *sym = NULL;
    int rc = mxp_symbol_load_file(o.net, &sym);
    if (rc) return cli_fail(rc, "loading '%s'", o.net);
    viz_graph g;
    memset(&g, 0, sizeof g);
    int crc = graph_build(sym, &o, &g);
    mxp_symbol_release(sym);
    if (crc) {
        graph_free(&g);
        return crc;
    }
    const char *slash = strrchr(o.net, '/');
    viz_dot d = {.g = &g, .title = slash ? slash + 1 : o.net};

    if (!o.out) {
        write_dot(stdout, &d);
        graph_free(&g);
        return fflush(stdout) == 0 ? CLI_OK : CLI_FAIL;
    }
    if (!render) {
        rc = mxp_file_write_atomic(o.out, "DOT file", write_dot, &d);
        graph_free(&g);
        return rc ? cli_fail(rc, "writing '%s'", o.out) : CLI_OK;
    }

    viz_render r = {.dot = d, .format = ext};
    rc = mxp_file_write_atomic(o.out, "picture", render_with_dot, &r);
    if (rc == MXP_OK) {
        graph_free(&g);
        return CLI_OK;
    }
    int ret = CLI_FAIL;
    if (r.not_found) {
        /* No Graphviz: the DOT text still comes out, beside the picture. */
        size_t n = (size_t)(ext - o.out);
        char *dotpath = malloc(n + 4);
        if (dotpath) {
            snprintf(dotpath, n + 4, "%.*sdot", (int)n, o.out);
            int wrc = mxp_file_write_atomic(dotpath, "DOT file", write_dot, &d);
            if (wrc) cli_fail(wrc, "writing '%s'", dotpath);
            else
                cli_err("viz: cannot draw '%s': Graphviz's 'dot' is not on PATH (Debian package graphviz); "
                        "wrote the DOT text to '%s' instead (render it with: dot -T%s '%s' -o '%s')",
                        o.out, dotpath, ext, dotpath, o.out);
            free(dotpath);
        } else {
            cli_err("out of memory");
        }
    } else if (r.exec_errno) {
        cli_err("viz: cannot run Graphviz's 'dot': %s", strerror(r.exec_errno));
    } else if (r.dot_status) {
        if (WIFEXITED(r.dot_status))
            cli_err("viz: Graphviz's 'dot -T%s' failed (exit status %d); '%s' was not written", ext,
                    WEXITSTATUS(r.dot_status), o.out);
        else
            cli_err("viz: Graphviz's 'dot -T%s' was killed by signal %d; '%s' was not written", ext,
                    WTERMSIG(r.dot_status), o.out);
    } else {
        cli_fail(rc, "writing '%s'", o.out);
    }
    graph_free(&g);
    return ret;
}
