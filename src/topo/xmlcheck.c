/*
 * An hwloc XML topology file, read with libxml2 before hwloc sees it.
 *
 * hwloc 2.9.0 (Debian 12) reads XML with its own minimal parser unless its
 * libxml2 plugin is installed, and that parser trusts its input: a value
 * hiding a tag, a stray quote among attributes, elements that do not nest, a
 * tag or value left open at the end of the file, a NUL byte, an attribute
 * named twice each made it crash (tests/fuzz/fuzz_topo_xml found them all).
 * So the file is parsed here by libxml2, a real XML parser, and hwloc is
 * never given the file itself: it gets the same document written anew from
 * libxml2's tree in the one shape hwloc's own exporter writes (one element
 * per tag, attributes as name="value" with hwloc's escapes, text only in
 * elements without children), which its minimal parser reads as it was
 * written to. Between the two, the tree is checked for what well-formed XML
 * may still hold and hwloc 2.9.0 does not survive:
 *   - the root is <topology> (with at most a numeric version); every
 *     <object> has a type and sits in the root or in another object;
 *   - names use hwloc's alphabet (a-z, 0-9 and _ for elements, a-z and _
 *     for attributes: its parser stops reading a tag at any other
 *     character); no namespaces, no entity of the file's own;
 *   - an object with a cpuset or nodeset has all four of cpuset,
 *     complete_cpuset, nodeset and complete_nodeset: otherwise hwloc
 *     dereferences a NULL bitmap (fixed in later hwloc, open-mpi/hwloc pull
 *     request 783); every set, of any element, is one hwloc's bitmap parser
 *     reads (it fails an assertion on a cpukind's cpuset ",0x1");
 *   - a PU and a NUMA node have an OS index, at most TOPO_MAX_OS_INDEX.
 * Errors name the file, the line and what is wrong.
 */
#include <errno.h>
#include <hwloc.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fault.h"
#include "topo/topo_impl.h"

/* Largest XML file read (hwloc's export of an 8192-CPU machine is a few MiB). */
#define XML_MAX_BYTES (256u << 20)
/* Deepest element nesting accepted (hwloc writes a dozen levels). */
#define XML_MAX_DEPTH 128

/* The text of err: "input 'FILE': line N: what". */
static void fail(char *err, size_t errlen, const char *input, long line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void fail(char *err, size_t errlen, const char *input, long line, const char *fmt, ...)
{
    int n = line > 0 ? snprintf(err, errlen, "input '%s': line %ld: ", input, line)
                     : snprintf(err, errlen, "input '%s': ", input);
    if (n < 0 || (size_t)n >= errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
}

/* ---- reading and parsing ------------------------------------------------------ */

/* The whole file in a malloc'ed buffer. */
static int read_all(const char *input, char **out, size_t *outlen, char *err, size_t errlen)
{
    FILE *f = fopen(input, "re");
    if (!f) {
        fail(err, errlen, input, 0, "cannot read (%s)", strerror(errno));
        return -EINVAL;
    }
    char *buf = NULL;
    size_t cap = 0, len = 0, n;
    do {
        if (len + 1 >= cap) {
            char *nb = cap < XML_MAX_BYTES ? usched__realloc(buf, cap = cap ? cap * 2 : 65536) : NULL;
            if (!nb) {
                fail(err, errlen, input, 0, "XML file too large (over %u MiB) or out of memory",
                     XML_MAX_BYTES >> 20);
                free(buf);
                fclose(f);
                return -ENOMEM;
            }
            buf = nb;
        }
        n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
    } while (n > 0);
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        fail(err, errlen, input, 0, "cannot read (I/O error)");
        free(buf);
        return -EINVAL;
    }
    buf[len] = '\0';
    *out = buf;
    *outlen = len;
    return 0;
}

/* The first error libxml2 reports while parsing (later ones follow from it). */
struct first_error {
    bool set;
    int code; /* xmlParserErrors */
    long line;
    char msg[200];
};

static void keep_first_error(void *ctx, xmlErrorPtr e)
{
    struct first_error *fe = ((xmlParserCtxtPtr)ctx)->_private;
    if (fe->set || !e || e->level < XML_ERR_ERROR) return;
    fe->set = true;
    fe->code = e->code;
    fe->line = e->line;
    snprintf(fe->msg, sizeof fe->msg, "%s", e->message ? e->message : "unknown error");
    /* libxml2's messages end with a newline, some hold one: one line here */
    for (char *c = fe->msg; (c = strchr(c, '\n'));) *c = ' ';
    size_t n = strlen(fe->msg);
    while (n && fe->msg[n - 1] == ' ') fe->msg[--n] = '\0';
}

static pthread_once_t xml_once = PTHREAD_ONCE_INIT;
static void xml_init(void) { xmlInitParser(); }

/* The document of buf, NULL with err set (*r: -EINVAL, -ENOMEM) if it is
 * not well-formed XML. No network, no external DTD, no entity substitution
 * beyond XML's own five and character references. */
static xmlDocPtr parse(const char *input, const char *buf, size_t len, char *err, size_t errlen,
                       int *r)
{
    pthread_once(&xml_once, xml_init);
    xmlParserCtxtPtr ctxt = xmlNewParserCtxt();
    if (!ctxt) {
        fail(err, errlen, input, 0, "out of memory");
        *r = -ENOMEM;
        return NULL;
    }
    struct first_error fe = {0};
    ctxt->_private = &fe;
    ctxt->sax->serror = keep_first_error;
    int opts = XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING | XML_PARSE_BIG_LINES |
               XML_PARSE_NOCDATA;
    xmlDocPtr doc = xmlCtxtReadMemory(ctxt, buf, (int)len, NULL, NULL, opts);
    if (!doc) {
        if (fe.set) fail(err, errlen, input, fe.line, "not well-formed XML: %s", fe.msg);
        else fail(err, errlen, input, 0, "not well-formed XML");
        *r = fe.set && fe.code == XML_ERR_NO_MEMORY ? -ENOMEM : -EINVAL;
    }
    xmlFreeParserCtxt(ctxt);
    return doc;
}

/* ---- checking ------------------------------------------------------------------ */

static bool name_in(const xmlChar *s, const char *alphabet)
{
    return s && *s && strspn((const char *)s, alphabet) == strlen((const char *)s);
}

#define ELEMENT_CHARS "abcdefghijklmnopqrstuvwxyz0123456789_"
#define ATTR_CHARS "abcdefghijklmnopqrstuvwxyz_"

static bool is(const xmlNode *n, const char *name)
{
    return n && n->type == XML_ELEMENT_NODE && !strcmp((const char *)n->name, name);
}

/* The value of attribute a (text only: the file declares no entities). */
static const char *attr_text(const xmlAttr *a)
{
    return a->children && a->children->content ? (const char *)a->children->content : "";
}

/* At most 40 bytes of the value s for an error message, control characters
 * (a value may hold &#10;) shown as '?': the message stays one line. */
static const char *shown(const char *s, char buf[41])
{
    size_t i = 0;
    for (; s[i] && i < 40; i++) buf[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
    buf[i] = '\0';
    return buf;
}

/* Whether hwloc parses s as a bitmap: hwloc 2.9.0 dereferences the NULL
 * bitmap of a set it failed to parse ("", "0x", "zz"), and fails an
 * assertion on a set starting with a comma (",0x2", ", 1"; every other
 * string of up to 5 characters of ",0xf. 1-" was tried), so those are
 * refused without asking it. */
static bool set_parses(const char *s)
{
    if (!*s || *s == ',') return false;
    hwloc_bitmap_t b = hwloc_bitmap_alloc();
    bool ok = b && hwloc_bitmap_sscanf(b, s) == 0;
    hwloc_bitmap_free(b);
    return ok;
}

/* Whether attribute `name` holds a set: hwloc's names of sets end so
 * (an object's cpuset, complete_cpuset, allowed_nodeset..., a cpukind's
 * cpuset, a memattr_value's initiator_cpuset). */
static bool is_set(const char *name)
{
    size_t n = strlen(name);
    return (n >= 6 && !strcmp(name + n - 6, "cpuset")) || (n >= 7 && !strcmp(name + n - 7, "nodeset"));
}

/* An <object>: its type, its four sets, a PU's or NUMA node's OS index
 * (every set was parsed already). */
static int check_object(const xmlNode *n, const char *input, char *err, size_t errlen)
{
    static const char *const sets[] = {"cpuset", "complete_cpuset", "nodeset", "complete_nodeset"};
    long line = xmlGetLineNo(n);
    const char *type = NULL, *os = NULL;
    char buf[41];
    int have = 0;
    for (const xmlAttr *a = n->properties; a; a = a->next) {
        const char *name = (const char *)a->name;
        if (!strcmp(name, "type")) type = attr_text(a);
        if (!strcmp(name, "os_index")) os = attr_text(a);
        for (int i = 0; i < 4; i++)
            if (!strcmp(name, sets[i])) have |= 1 << i;
    }
    if (!type) {
        fail(err, errlen, input, line, "object without a type");
        return -EINVAL;
    }
    if ((have & 0x5) && (have & 0xf) != 0xf) {
        fail(err, errlen, input, line,
             "object has a cpuset or nodeset but not all of cpuset, complete_cpuset, nodeset "
             "and complete_nodeset");
        return -EINVAL;
    }
    /* hwloc sets the bit of a PU's or a NUMA node's OS index in a bitmap
     * while loading: a missing one (UINT_MAX) or a huge one costs it half a
     * gigabyte and seconds (tests/fuzz/fuzz_topo_xml timed out on a NUMA
     * node whose os_index was misspelt). The type is read as hwloc reads
     * it: hwloc_type_sscanf takes "NUMANo0x1" for a NUMA node too (the
     * fuzzer's next timeout). */
    hwloc_obj_type_t t;
    bool known = hwloc_type_sscanf(type, &t, NULL, 0) == 0;
    const char *what = known && t == HWLOC_OBJ_PU         ? "a CPU (PU)"
                       : known && t == HWLOC_OBJ_NUMANODE ? "a NUMA node (NUMANode)"
                                                          : NULL;
    if (!what) return 0;
    if (!os) {
        fail(err, errlen, input, line, "%s without an OS index (os_index)", what);
        return -EINVAL;
    }
    long v = 0;
    for (const char *d = os; v <= TOPO_MAX_OS_INDEX; d++) {
        if (!*d && d > os) return 0;
        if (*d < '0' || *d > '9') {
            fail(err, errlen, input, line, "%s with OS index '%s', not a number", what, shown(os, buf));
            return -EINVAL;
        }
        v = v * 10 + (*d - '0');
    }
    fail(err, errlen, input, line, "%s with OS index %s, above %d", what, shown(os, buf), TOPO_MAX_OS_INDEX);
    return -EINVAL;
}

/* Whether s is only XML white space. */
static bool blank(const xmlChar *s)
{
    return !s || strspn((const char *)s, " \t\r\n") == strlen((const char *)s);
}

/* Element n and all below it (depth: n's own, the root's is 1). */
static int check_element(const xmlNode *n, int depth, const char *input, char *err, size_t errlen)
{
    long line = xmlGetLineNo(n);
    char buf[41];
    if (depth > XML_MAX_DEPTH) {
        fail(err, errlen, input, line, "elements nest more than %d deep", XML_MAX_DEPTH);
        return -EINVAL;
    }
    if (!name_in(n->name, ELEMENT_CHARS) || n->ns || n->nsDef) {
        fail(err, errlen, input, line, "element '%.40s': hwloc's element names are a-z, 0-9 and _, "
             "without namespace", (const char *)n->name);
        return -EINVAL;
    }
    for (const xmlAttr *a = n->properties; a; a = a->next) {
        if (!name_in(a->name, ATTR_CHARS) || a->ns) {
            fail(err, errlen, input, line, "attribute '%.40s' of '%.40s': hwloc's attribute names are "
                 "a-z and _", (const char *)a->name, (const char *)n->name);
            return -EINVAL;
        }
        if (a->children && (a->children->type != XML_TEXT_NODE || a->children->next)) {
            fail(err, errlen, input, line, "attribute '%.40s' of '%.40s' refers to an entity",
                 (const char *)a->name, (const char *)n->name);
            return -EINVAL;
        }
        if (is_set((const char *)a->name) && !set_parses(attr_text(a))) {
            fail(err, errlen, input, line, "%.40s's %.40s '%s' is not a set hwloc can read",
                 (const char *)n->name, (const char *)a->name, shown(attr_text(a), buf));
            return -EINVAL;
        }
    }
    if (is(n, "object")) {
        if (!is(n->parent, "object") && !is(n->parent, "topology")) {
            fail(err, errlen, input, line, "an object inside '%.40s' (objects sit in the topology "
                 "or in objects)", (const char *)n->parent->name);
            return -EINVAL;
        }
        int r = check_object(n, input, err, errlen);
        if (r < 0) return r;
    }
    bool text = false, elements = false;
    for (const xmlNode *c = n->children; c; c = c->next) {
        switch (c->type) {
        case XML_ELEMENT_NODE: {
            elements = true;
            int r = check_element(c, depth + 1, input, err, errlen);
            if (r < 0) return r;
            break;
        }
        case XML_TEXT_NODE:
        case XML_CDATA_SECTION_NODE:
            if (blank(c->content)) break;
            text = true;
            /* hwloc's parser ends text at the next '<' */
            if (strchr((const char *)c->content, '<')) {
                fail(err, errlen, input, xmlGetLineNo(c), "text in '%.40s' holds '<'",
                     (const char *)n->name);
                return -EINVAL;
            }
            break;
        case XML_COMMENT_NODE:
        case XML_PI_NODE: break;
        default:
            fail(err, errlen, input, xmlGetLineNo(c), "'%.40s' holds an entity reference or "
                 "another construct hwloc does not read", (const char *)n->name);
            return -EINVAL;
        }
    }
    if (text && elements) {
        fail(err, errlen, input, line, "'%.40s' holds both text and elements", (const char *)n->name);
        return -EINVAL;
    }
    return 0;
}

/* The whole document: its root, then every element. */
static int check_doc(const xmlDoc *doc, const char *input, char *err, size_t errlen)
{
    /* An internal DTD subset could declare entities (hwloc writes only
     * <!DOCTYPE topology SYSTEM "hwloc2.dtd">). */
    if (doc->intSubset && doc->intSubset->children) {
        fail(err, errlen, input, 0, "the DOCTYPE declares entities or elements of its own (hwloc's files declare none)");
        return -EINVAL;
    }
    const xmlNode *root = xmlDocGetRootElement(doc);
    if (!root || !is(root, "topology")) {
        fail(err, errlen, input, root ? xmlGetLineNo(root) : 0,
             "the root element is '%.40s', not 'topology'", root ? (const char *)root->name : "");
        return -EINVAL;
    }
    for (const xmlAttr *a = root->properties; a; a = a->next) {
        /* hwloc reads "%u.%u": 1 to 4 digits, a dot, 1 to 4 digits */
        const char *v = attr_text(a);
        size_t major = strspn(v, "0123456789");
        size_t minor = v[major] == '.' ? strspn(v + major + 1, "0123456789") : 0;
        char buf[41];
        if (strcmp((const char *)a->name, "version") || a->ns) {
            fail(err, errlen, input, xmlGetLineNo(root),
                 "the topology element has attribute '%.40s' (hwloc writes only 'version')",
                 (const char *)a->name);
            return -EINVAL;
        }
        if (major < 1 || major > 4 || minor < 1 || minor > 4 || v[major + 1 + minor]) {
            fail(err, errlen, input, xmlGetLineNo(root), "topology version '%s' is not a number like 2.0",
                 shown(v, buf));
            return -EINVAL;
        }
    }
    return check_element(root, 1, input, err, errlen);
}

/* ---- writing for hwloc ------------------------------------------------------- */

struct out {
    char *p;
    size_t len, cap;
    bool oom;
};

static void put(struct out *o, const char *s, size_t n)
{
    if (o->oom) return;
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 65536;
        while (cap < o->len + n + 1) cap *= 2;
        char *p = usched__realloc(o->p, cap);
        if (!p) {
            o->oom = true;
            return;
        }
        o->p = p;
        o->cap = cap;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
    o->p[o->len] = '\0';
}

static void puts_(struct out *o, const char *s) { put(o, s, strlen(s)); }

/* An attribute value with the escapes hwloc's parser undoes (and only those). */
static void put_value(struct out *o, const char *s)
{
    for (; *s; s++) {
        size_t n = strcspn(s, "\n\r\t\"<>&");
        put(o, s, n);
        s += n;
        if (!*s) break;
        static const char *const esc[] = {['\n'] = "&#10;", ['\r'] = "&#13;", ['\t'] = "&#9;",
                                          ['"'] = "&quot;", ['<'] = "&lt;",  ['>'] = "&gt;",
                                          ['&'] = "&amp;"};
        puts_(o, esc[(unsigned char)*s]);
    }
}

static void put_element(struct out *o, const xmlNode *n, int depth)
{
    for (int i = 0; i < depth; i++) puts_(o, "  ");
    puts_(o, "<");
    puts_(o, (const char *)n->name);
    for (const xmlAttr *a = n->properties; a; a = a->next) {
        puts_(o, " ");
        puts_(o, (const char *)a->name);
        puts_(o, "=\"");
        put_value(o, attr_text(a));
        puts_(o, "\"");
    }
    bool elements = false, text = false;
    for (const xmlNode *c = n->children; c; c = c->next) {
        if (c->type == XML_ELEMENT_NODE) elements = true;
        if ((c->type == XML_TEXT_NODE || c->type == XML_CDATA_SECTION_NODE) && !blank(c->content))
            text = true;
    }
    if (text) {
        /* Text as it is: hwloc reads an element's text verbatim, up to '<'. */
        puts_(o, ">");
        for (const xmlNode *c = n->children; c; c = c->next)
            if (c->type == XML_TEXT_NODE || c->type == XML_CDATA_SECTION_NODE)
                puts_(o, (const char *)c->content);
    } else if (elements || depth == 0) {
        puts_(o, ">\n");
        for (const xmlNode *c = n->children; c; c = c->next)
            if (c->type == XML_ELEMENT_NODE) put_element(o, c, depth + 1);
        for (int i = 0; i < depth; i++) puts_(o, "  ");
    } else {
        puts_(o, "/>\n");
        return;
    }
    puts_(o, "</");
    puts_(o, (const char *)n->name);
    puts_(o, ">\n");
}

int usched__topo_xml_read(const char *input, char **out, size_t *outlen, char *err, size_t errlen)
{
    char *buf;
    size_t len;
    int r = read_all(input, &buf, &len, err, errlen);
    if (r < 0) return r;
    xmlDocPtr doc = parse(input, buf, len, err, errlen, &r);
    free(buf);
    if (!doc) return r;
    r = check_doc(doc, input, err, errlen);
    if (r == 0) {
        struct out o = {0};
        put_element(&o, xmlDocGetRootElement(doc), 0);
        if (o.oom) {
            fail(err, errlen, input, 0, "out of memory");
            free(o.p);
            r = -ENOMEM;
        } else {
            *out = o.p;
            *outlen = o.len + 1;
        }
    }
    xmlFreeDoc(doc);
    return r;
}
