/* img_list.h — MXNet's image list (.lst) files, as im2rec writes them and
 * ImageIter and `mxplug im2rec` (pack mode) read them: one image per line,
 * "index<TAB>label[<TAB>label...]<TAB>path", tab-separated, at least one
 * label (MXNet's im2rec.py read_list: "at least three parts"), labels
 * decimal floats, the path relative to a root folder and never empty.
 * Empty lines are skipped; lines may be of any length; "\r\n" ends a line
 * too.  A malformed line is an error naming the file and the line number.
 * Plain C (libc only): the pack and the CLI both compile it. */
#ifndef MXP_IO_IMAGE_IMG_LIST_H
#define MXP_IO_IMAGE_IMG_LIST_H

#include <stddef.h>
#include <stdint.h>

typedef struct img_list_entry {
    uint64_t key;      /* the index column                   */
    uint32_t n_labels; /* >= 1                                */
    size_t first_label; /* into img_list.labels               */
    char *path;        /* malloc'd                            */
    size_t line;       /* 1-based line number in the file     */
} img_list_entry;

typedef struct img_list {
    img_list_entry *v;
    size_t n;
    float *labels;     /* every entry's labels, in file order */
} img_list;

/* Read the list file at path into out (zeroed first).  Returns 0; -1 for
 * a malformed line, -2 when the file cannot be opened or read; with err
 * ("'x.lst' line 3: ...") and out empty. */
int img_list_load(const char *path, img_list *out, char *err, size_t errlen);
void img_list_free(img_list *l);

#endif /* MXP_IO_IMAGE_IMG_LIST_H */
