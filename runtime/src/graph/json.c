/* json.c — symbols to and from MXNet's symbol JSON (nnvm SaveJSON /
 * LoadJSON plus MXNet's legacy upgraders, src/nnvm/legacy_json_util.cc).
 *
 * Written: {"nodes": [{"op", "name", "attrs" (sorted, omitted when empty),
 * "inputs": [[node, index, 0]]}], "arg_nodes": [variable node ids],
 * "node_row_ptr": prefix sums of each node's output count (hidden outputs
 * counted), "heads": [[node, index, 0]], "attrs": {"mxnet_version":
 * ["int", 10901]}}.  Nodes in DFS post-order, so inputs come first.
 * Read: also "param" and "attr" (merged into attrs), inputs of two
 * elements (version 0), files without mxnet_version (= 800);
 * "backward_source_id" and "control_deps" are ignored.  Before 0.9.0
 * (900) aux states were not inputs: a node with exactly its arguments as
 * inputs gets variables "{node}_{auxname}" for its aux states.
 * Files older than the version written here get MXNet's hidden-key rule
 * (UpgradeJSON_FixParsing): a key that starts or ends with ctx_group,
 * lr_mult, wd_mult, force_mirroring or mirror_stage is no op parameter;
 * the bare key becomes "__key__" on its node, "{arg}_key" (weight_lr_mult)
 * becomes "__key__" on the variable feeding input {arg}.
 * Uses jansson; no hand-rolled JSON. */
#include "graph/graph.h"

#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MXP_JSON_MXNET_VERSION 10901
#define MXP_JSON_LEGACY_VERSION 800

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static json_t *entry_json(int node, int index) { return json_pack("[iii]", node, index, 0); }

int mxp_symbol_save_json(const mxp_symbol *sym, char **out_json) {
    if (out_json) *out_json = NULL;
    if (!sym || !out_json) return mxp__error(MXP_EMISUSE, "mxp_symbol_save_json: NULL argument");
    mxp__igraph *g;
    int rc = mxp__igraph_build((mxp_symbol *)sym, &g);
    if (rc) return rc;
    json_t *root = json_object(), *nodes = json_array(), *argn = json_array(), *rowp = json_array(),
           *heads = json_array();
    int ok = root && nodes && argn && rowp && heads;
    int row = 0;
    ok = ok && !json_array_append_new(rowp, json_integer(0));
    for (int i = 0; i < g->n_nodes && ok; i++) {
        const mxp__inode *in = &g->nodes[i];
        const gnode *n = in->g;
        json_t *jn = json_object(), *inputs = json_array();
        ok = jn && inputs;
        ok = ok && !json_object_set_new(jn, "op", json_string(n->op ? n->op : "null"));
        ok = ok && !json_object_set_new(jn, "name", json_string(n->name));
        if (ok && n->n_attrs) {
            const char **keys = malloc((size_t)n->n_attrs * sizeof *keys);
            json_t *attrs = json_object();
            ok = keys && attrs;
            if (ok) {
                for (int k = 0; k < n->n_attrs; k++) keys[k] = n->keys[k];
                qsort(keys, (size_t)n->n_attrs, sizeof *keys, cmp_str);
                for (int k = 0; k < n->n_attrs && ok; k++)
                    ok = !json_object_set_new(attrs, keys[k], json_string(mxp__gnode_attr(n, keys[k])));
                ok = ok && !json_object_set_new(jn, "attrs", attrs);
                attrs = NULL;
            }
            json_decref(attrs);
            free(keys);
        }
        for (int j = 0; j < n->n_inputs && ok && !in->is_var; j++) {
            int e = in->in[j], src = g->entry_node[e];
            ok = !json_array_append_new(inputs, entry_json(src, e - g->nodes[src].entry0));
        }
        ok = ok && !json_object_set_new(jn, "inputs", inputs);
        if (!ok) json_decref(inputs);
        ok = ok && !json_array_append_new(nodes, jn);
        if (!ok) json_decref(jn);
        if (ok && in->is_var) ok = !json_array_append_new(argn, json_integer(i));
        row += in->n_outs;
        ok = ok && !json_array_append_new(rowp, json_integer(row));
    }
    for (int h = 0; h < g->n_heads && ok; h++) {
        int e = g->heads[h], src = g->entry_node[e];
        ok = !json_array_append_new(heads, entry_json(src, e - g->nodes[src].entry0));
    }
    if (ok) {
        ok = !json_object_set_new(root, "nodes", nodes) && !json_object_set_new(root, "arg_nodes", argn) &&
             !json_object_set_new(root, "node_row_ptr", rowp) && !json_object_set_new(root, "heads", heads);
        nodes = argn = rowp = heads = NULL;
        ok = ok && !json_object_set_new(root, "attrs",
                                        json_pack("{s:[si]}", "mxnet_version", "int", MXP_JSON_MXNET_VERSION));
    }
    json_decref(nodes);
    json_decref(argn);
    json_decref(rowp);
    json_decref(heads);
    char *s = ok ? json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    mxp__igraph_free(g);
    if (!s) return mxp__error_oom("symbol JSON");
    *out_json = s;
    return MXP_OK;
}

static int put_text(FILE *f, void *text) {
    fputs(text, f);
    return MXP_OK;
}

/* Atomic (temporary, fsync, rename): a crash while checkpointing leaves the
 * previous file whole, which every earlier epoch's checkpoint still needs. */
int mxp_symbol_save_file(const mxp_symbol *sym, const char *path) {
    if (!path) return mxp__error(MXP_EMISUSE, "mxp_symbol_save_file: NULL path");
    char *s;
    int rc = mxp_symbol_save_json(sym, &s);
    if (rc) return rc;
    rc = mxp_file_write_atomic(path, "symbol file", put_text, s);
    free(s);
    return rc;
}

/* ------------------------------------------------------------ load */
/* Gather string attributes of one node from attrs / attr / param. */
static int collect_attrs(json_t *jn, int idx, int *n, char ***keys, char ***vals) {
    static const char *const fields[] = {"attrs", "attr", "param"};
    for (size_t f = 0; f < MXP_ARRAY_LEN(fields); f++) {
        json_t *o = json_object_get(jn, fields[f]);
        if (!o || json_is_null(o)) continue;
        if (!json_is_object(o)) return mxp__error(MXP_EFORMAT, "symbol JSON: node %d: '%s' is not an object", idx, fields[f]);
        const char *k;
        json_t *v;
        json_object_foreach(o, k, v) {
            if (!json_is_string(v))
                return mxp__error(MXP_EFORMAT, "symbol JSON: node %d: attribute '%s' is not a string", idx, k);
            int dup = 0;
            for (int i = 0; i < *n && !dup; i++) dup = !strcmp((*keys)[i], k);
            if (dup) continue;
            char **k2 = realloc(*keys, (size_t)(*n + 1) * sizeof **keys);
            if (!k2) return mxp__error_oom("symbol JSON");
            *keys = k2;
            char **v2 = realloc(*vals, (size_t)(*n + 1) * sizeof **vals);
            if (!v2) return mxp__error_oom("symbol JSON");
            *vals = v2;
            (*keys)[*n] = strdup(k);
            (*vals)[*n] = strdup(json_string_value(v));
            (*n)++;
            if (!(*keys)[*n - 1] || !(*vals)[*n - 1]) return mxp__error_oom("symbol JSON");
        }
    }
    return MXP_OK;
}

/* ------------------------------------------------ legacy hidden keys */
static const char *const hidden_keys[] = {"ctx_group", "lr_mult", "wd_mult", "force_mirroring", "mirror_stage"};

/* Index of the hidden key that k starts or ends with (MXNet: the key's
 * last occurrence in k is at 0 or at the end), -1 if none; *pos is where. */
static int hidden_key(const char *k, size_t *pos) {
    size_t kl = strlen(k);
    for (size_t h = 0; h < MXP_ARRAY_LEN(hidden_keys); h++) {
        size_t hl = strlen(hidden_keys[h]);
        const char *last = NULL;
        for (const char *p = strstr(k, hidden_keys[h]); p; p = strstr(p + 1, hidden_keys[h])) last = p;
        if (!last) continue;
        size_t at = (size_t)(last - k);
        if (at == 0 || at == kl - hl) {
            *pos = at;
            return (int)h;
        }
    }
    return -1;
}

/* Put the hidden pairs (k, v) of node n (JSON node idx, inputs jin) where
 * MXNet's upgrade puts them.  Pairs it leaves in place stay plain
 * attributes on a variable; on an op node they are an error, as MXNet's
 * re-parse of the node's parameters fails on them. */
static int place_hidden(gnode *n, int idx, json_t *jin, gnode **nodes, const char *k, const char *v) {
    size_t pos = 0;
    int h = hidden_key(k, &pos);
    size_t hl = strlen(hidden_keys[h]), kl = strlen(k);
    char hidden[64];
    snprintf(hidden, sizeof hidden, "__%s__", hidden_keys[h]);
    if (pos == 0 && kl == hl) return mxp__gnode_set_attr(n, hidden, v);
    if (pos > 1 && pos == kl - hl && n->op) {
        for (int a = 0; a < n->n_args; a++) {
            if (strlen(n->names[a]) != pos - 1 || strncmp(n->names[a], k, pos - 1)) continue;
            json_t *je = json_array_get(jin, (size_t)a);
            json_t *jid = json_is_array(je) ? json_array_get(je, 0) : NULL;
            json_int_t nid = json_is_integer(jid) ? json_integer_value(jid) : -1;
            if (nid >= 0 && nid < idx && nodes[nid] && !nodes[nid]->op)
                return mxp__gnode_set_attr(nodes[nid], hidden, v);
            break;
        }
    }
    if (!n->op) return mxp__gnode_set_attr(n, k, v);
    return mxp__error(MXP_EFORMAT,
                      "symbol JSON: node '%s' (op '%s'): legacy attribute '%s' is neither '%s' nor "
                      "'{input}_%s' of a variable input",
                      n->name, n->op, k, hidden_keys[h], hidden_keys[h]);
}

static int parse_entry(json_t *je, int n_nodes_known, gnode **nodes, const char *what, int idx, gentry *out) {
    if (!json_is_array(je) || json_array_size(je) < 2 || json_array_size(je) > 3 ||
        !json_is_integer(json_array_get(je, 0)) || !json_is_integer(json_array_get(je, 1)))
        return mxp__error(MXP_EFORMAT, "symbol JSON: %s %d: an entry must be [node, index(, version)]", what, idx);
    json_int_t nid = json_integer_value(json_array_get(je, 0)), oi = json_integer_value(json_array_get(je, 1));
    json_t *jv = json_array_get(je, 2);
    if (nid < 0 || nid >= n_nodes_known)
        return mxp__error(MXP_EFORMAT, "symbol JSON: %s %d: refers to node %lld, not before it", what, idx, (long long)nid);
    gnode *src = nodes[nid];
    int nout = src->op ? src->n_outs : 1;
    if (oi < 0 || oi >= nout)
        return mxp__error(MXP_EFORMAT, "symbol JSON: %s %d: output %lld of node '%s', which has %d", what, idx,
                          (long long)oi, src->name, nout);
    out->node = src;
    out->index = (int)oi;
    out->version = jv && json_is_integer(jv) ? (int)json_integer_value(jv) : 0;
    return MXP_OK;
}

static int load_root(json_t *root, mxp_symbol **out) {
    if (!json_is_object(root)) return mxp__error(MXP_EFORMAT, "symbol JSON: the top level is not an object");
    json_t *jnodes = json_object_get(root, "nodes"), *jheads = json_object_get(root, "heads");
    if (!json_is_array(jnodes)) return mxp__error(MXP_EFORMAT, "symbol JSON: 'nodes' is missing or not a list");
    if (!json_is_array(jheads)) return mxp__error(MXP_EFORMAT, "symbol JSON: 'heads' is missing or not a list");
    int version = MXP_JSON_LEGACY_VERSION;
    json_t *ga = json_object_get(root, "attrs");
    json_t *jver = ga ? json_object_get(ga, "mxnet_version") : NULL;
    if (jver) {
        if (!json_is_array(jver) || json_array_size(jver) != 2 || !json_is_integer(json_array_get(jver, 1)))
            return mxp__error(MXP_EFORMAT, "symbol JSON: mxnet_version must be [\"int\", N]");
        version = (int)json_integer_value(json_array_get(jver, 1));
    }
    if (version > MXP_JSON_MXNET_VERSION)
        MXP_LOGW("graph", "symbol JSON written by MXNet %d, newer than %d; loading anyway", version,
                 MXP_JSON_MXNET_VERSION);
    size_t nn = json_array_size(jnodes);
    gnode **nodes = calloc(nn + 1, sizeof *nodes);
    if (!nodes) return mxp__error_oom("symbol JSON");
    int rc = MXP_OK;
    for (size_t i = 0; i < nn && !rc; i++) {
        json_t *jn = json_array_get(jnodes, i);
        json_t *jop = json_object_get(jn, "op"), *jname = json_object_get(jn, "name");
        if (!json_is_object(jn) || !json_is_string(jop) || !json_is_string(jname)) {
            rc = mxp__error(MXP_EFORMAT, "symbol JSON: node %zu: needs string 'op' and 'name'", i);
            break;
        }
        const char *op = json_string_value(jop), *name = json_string_value(jname);
        int na = 0;
        char **keys = NULL, **vals = NULL;
        rc = collect_attrs(jn, (int)i, &na, &keys, &vals);
        /* Older files: hidden keys go last, out of the op's parameters. */
        int n_plain = na;
        if (!rc && version < MXP_JSON_MXNET_VERSION) {
            n_plain = 0;
            for (int k = 0; k < na; k++) {
                size_t pos;
                if (hidden_key(keys[k], &pos) >= 0) continue;
                char *tk = keys[k], *tv = vals[k];
                memmove(keys + n_plain + 1, keys + n_plain, (size_t)(k - n_plain) * sizeof *keys);
                memmove(vals + n_plain + 1, vals + n_plain, (size_t)(k - n_plain) * sizeof *vals);
                keys[n_plain] = tk;
                vals[n_plain] = tv;
                n_plain++;
            }
        }
        if (!rc) {
            if (!strcmp(op, "null")) {
                rc = mxp__gnode_variable(name, &nodes[i]);
                for (int k = 0; k < n_plain && !rc; k++) rc = mxp__gnode_set_attr(nodes[i], keys[k], vals[k]);
            } else {
                rc = mxp__gnode_op(op, name, n_plain, (const char *const *)keys, (const char *const *)vals,
                                   &nodes[i]);
                if (rc == MXP_ENOENT)
                    rc = mxp__error(MXP_ENOENT, "symbol JSON: failed loading node '%s' of unknown op '%s' (no manifest "
                                    "provides it: `mxplug list` shows the known ops, `mxplug packs` the packs; a "
                                    "pack's manifest is found through MXP_PLUGIN_PATH or MXP_MANIFEST)", name, op);
            }
        }
        for (int k = n_plain; k < na && !rc; k++)
            rc = place_hidden(nodes[i], (int)i, json_object_get(jn, "inputs"), nodes, keys[k], vals[k]);
        for (int k = 0; k < na; k++) {
            free(keys[k]);
            free(vals[k]);
        }
        free(keys);
        free(vals);
        if (rc) break;
        gnode *n = nodes[i];
        json_t *jin = json_object_get(jn, "inputs");
        size_t ni = jin ? json_array_size(jin) : 0;
        if (jin && !json_is_array(jin)) {
            rc = mxp__error(MXP_EFORMAT, "symbol JSON: node '%s': 'inputs' is not a list", name);
            break;
        }
        if (!n->op) {
            if (ni) rc = mxp__error(MXP_EFORMAT, "symbol JSON: variable '%s' has inputs", name);
            continue;
        }
        int want = n->n_args + n->n_aux;
        int legacy_aux = version < 900 && (int)ni == n->n_args && n->n_aux > 0;
        if ((int)ni != want && !legacy_aux) {
            rc = mxp__error(MXP_EFORMAT, "symbol JSON: node '%s' (op '%s'): %zu inputs, the op takes %d", name, n->op,
                            ni, want);
            break;
        }
        n->inputs = calloc((size_t)want + 1, sizeof *n->inputs);
        if (!n->inputs) {
            rc = mxp__error_oom("symbol JSON");
            break;
        }
        for (size_t j = 0; j < ni && !rc; j++) {
            rc = parse_entry(json_array_get(jin, j), (int)i, nodes, "input of node", (int)i, &n->inputs[j]);
            if (!rc) {
                mxp__gnode_retain(n->inputs[j].node);
                n->n_inputs = (int)j + 1;
            }
        }
        /* Pre-0.9 files: aux states were implicit; make them variables. */
        for (int j = (int)ni; j < want && !rc; j++) {
            char nm[2 * MXP_NAME_MAX + 2];
            snprintf(nm, sizeof nm, "%s_%s", n->name, n->names[n->n_args + n->n_outs + (j - n->n_args)]);
            rc = mxp__gnode_variable(nm, &n->inputs[j].node);
            if (!rc) n->n_inputs = j + 1;
        }
    }
    size_t nh = json_array_size(jheads);
    gentry *heads = calloc(nh + 1, sizeof *heads);
    if (!rc && !heads) rc = mxp__error_oom("symbol JSON");
    if (!rc && nh == 0) rc = mxp__error(MXP_EFORMAT, "symbol JSON: 'heads' is empty");
    for (size_t h = 0; h < nh && !rc; h++)
        rc = parse_entry(json_array_get(jheads, h), (int)nn, nodes, "head", (int)h, &heads[h]);
    if (!rc) rc = mxp__symbol_new((int)nh, heads, out);
    free(heads);
    for (size_t i = 0; i < nn; i++) mxp__gnode_release(nodes[i]);
    free(nodes);
    return rc;
}

int mxp_symbol_load_json(const char *json, mxp_symbol **out) {
    if (out) *out = NULL;
    if (!json || !out) return mxp__error(MXP_EMISUSE, "mxp_symbol_load_json: NULL argument");
    json_error_t err;
    json_t *root = json_loads(json, JSON_REJECT_DUPLICATES, &err);
    if (!root)
        return mxp__error(MXP_EFORMAT, "symbol JSON:%d:%d: %s", err.line, err.column, err.text);
    int rc = load_root(root, out);
    json_decref(root);
    return rc;
}

int mxp_symbol_load_file(const char *path, mxp_symbol **out) {
    if (out) *out = NULL;
    if (!path || !out) return mxp__error(MXP_EMISUSE, "mxp_symbol_load_file: NULL argument");
    json_error_t err;
    FILE *f = NULL;
    int rc0 = mxp_file_open_read(path, "symbol file", 0, &f, NULL);
    if (rc0) return rc0;
    json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &err);
    fclose(f);
    if (!root) return mxp__error(MXP_EFORMAT, "%s:%d:%d: %s", path, err.line, err.column, err.text);
    int rc = load_root(root, out);
    json_decref(root);
    return rc ? mxp__error_prefix(rc, "symbol file '%s'", path) : MXP_OK;
}
