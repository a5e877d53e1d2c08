/* mxp/plugin.h — the one header a pack includes: the entry point and the
 * pack descriptor.  It includes the rest of the ABI.
 *
 * A pack exports exactly one symbol, named with the ABI major:
 *
 *     const mxp_plugin_desc *mxp_plugin_v1(void);
 *
 * Calling it must do nothing but return a pointer to a static descriptor.
 * The host validates the descriptor (major, min_host_minor, struct_size,
 * name) before any other pack code runs, then calls init with the host
 * table and a registrar, and fini before unloading.  Build a pack with
 *     cc $(pkg-config --cflags mxplug-plugin) -shared -fPIC \
 *        -fvisibility=hidden -Wl,-z,defs -o libmypack.so mypack.c
 * It must not link against libmxplug.  examples/template-pack/ is a pack to
 * copy.
 * Since ABI 1.0. */
/* Guide: writing-a-pack.md and the manifest schema manifest.md, installed in
 * $(PREFIX)/share/doc/mxplug/ (docs/ in the source tree); complete example
 * packs in $(PREFIX)/share/mxplug/examples/ (examples/). */
#ifndef MXP_PLUGIN_H
#define MXP_PLUGIN_H

#include <mxp/types.h>
#include <mxp/host.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MXP_PLUGIN_ENTRY_NAME "mxp_plugin_v1"

#if defined(__GNUC__)
#define MXP_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define MXP_PLUGIN_EXPORT
#endif

typedef struct mxp_plugin_init_args {
    mxp_header hdr;
    const mxp_host *host;       /* valid until fini returns; keep it        */
    mxp_registrar *registrar;   /* valid only during init                   */
    const char *library_path;   /* the .so being initialised                */
} mxp_plugin_init_args;

typedef struct mxp_plugin_fini_args {
    mxp_header hdr;
    const mxp_host *host;
} mxp_plugin_fini_args;

typedef struct mxp_plugin_desc {
    mxp_header hdr;             /* MXP_HEADER(mxp_plugin_desc): the ABI the
                                   pack was built against                   */
    uint16_t min_host_minor;    /* oldest host minor this pack needs        */
    uint16_t reserved0;
    uint32_t reserved1;
    const char *name;           /* pack name, e.g. "ops-nn" (as manifest)   */
    const char *version;        /* pack version, e.g. "1.2.0"               */
    const char *description;    /* one line                                 */
    const char *license;        /* SPDX id, e.g. "Apache-2.0"               */
    int (*init)(const mxp_plugin_init_args *a);
    void (*fini)(const mxp_plugin_fini_args *a); /* (optional) */
} mxp_plugin_desc;

typedef const mxp_plugin_desc *(*mxp_plugin_entry_fn)(void);

/* The entry point every pack defines (declared here so packs compile with
 * -Wmissing-prototypes). */
MXP_PLUGIN_EXPORT const mxp_plugin_desc *mxp_plugin_v1(void);

/* Define the entry point returning `desc` (a static mxp_plugin_desc). */
#define MXP_PLUGIN_DEFINE(desc) \
    MXP_PLUGIN_EXPORT const mxp_plugin_desc *mxp_plugin_v1(void) { return &(desc); }

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && UINTPTR_MAX == 0xFFFFFFFFFFFFFFFFu
_Static_assert(sizeof(mxp_plugin_init_args) == 32, "layout is frozen");
_Static_assert(sizeof(mxp_plugin_fini_args) == 16, "layout is frozen");
_Static_assert(offsetof(mxp_plugin_desc, min_host_minor) == 8, "layout is frozen");
_Static_assert(offsetof(mxp_plugin_desc, name) == 16, "layout is frozen");
_Static_assert(offsetof(mxp_plugin_desc, init) == 48, "layout is frozen");
_Static_assert(offsetof(mxp_plugin_desc, fini) == 56, "layout is frozen");
_Static_assert(sizeof(mxp_plugin_desc) == 64, "layout is frozen");
#endif

#ifdef __cplusplus
}
#endif
#endif /* MXP_PLUGIN_H */
