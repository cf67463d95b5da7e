/*
 * hwloc XML topology files that are not what they should be: each is refused
 * with an error that names the file, the line and what is wrong, never a
 * crash, and XML that is well-formed but not in the exact shape hwloc's own
 * writer uses (single quotes, comments, escapes, attributes over several
 * lines) loads as the same topology. The inputs that crashed hwloc 2.9.0's
 * reader (tests/fuzz/corpus/topo_xml/crash-*) are replayed here too, each
 * with the reason it must now be refused for.
 */
#include <dirent.h>
#include <hwloc.h>

#include "topo_test.h"

static char path[] = "/tmp/usched-topo-xml-XXXXXX";

static void write_file(const char *data, size_t len)
{
    FILE *f = fopen(path, "w");
    ASSERT(f);
    ASSERT_EQ(fwrite(data, 1, len, f), len);
    ASSERT_EQ(fclose(f), 0);
}

/* Loading `file` fails with -EINVAL and an error on one line that starts
 * with "input 'FILE': " and holds `why`. */
static void refused(const char *file, const char *why)
{
    usched__topo_t *t = (usched__topo_t *)1;
    char err[512] = "", head[4200];
    int r = usched__topo_load(&t, file, NULL, err, sizeof err);
    if (r != -EINVAL) TEST_FAIL_("%s: %d, expected -EINVAL (%s), for: %s", file, r, err, why);
    ASSERT(t == NULL);
    snprintf(head, sizeof head, "input '%s': ", file);
    ASSERT_EQ(strncmp(err, head, strlen(head)), 0);
    ASSERT_STR_CONTAINS(err, why);
    ASSERT(!strchr(err, '\n'));
}

/* The "tree" and "json" printouts of a loaded topology, one string. */
static char *printout(const char *input)
{
    usched__topo_t *t;
    char err[512] = "", *buf = NULL;
    size_t len = 0;
    int r = usched__topo_load(&t, input, NULL, err, sizeof err);
    if (r != 0) TEST_FAIL_("%s: %d (%s)", input, r, err);
    FILE *m = open_memstream(&buf, &len);
    ASSERT(m);
    ASSERT_OK(usched__topo_print(t, m, "tree"));
    ASSERT_OK(usched__topo_print(t, m, "json"));
    ASSERT_EQ(fclose(m), 0);
    usched__topo_free(t);
    ASSERT_GT(len, 0);
    return buf;
}

/* Four sets in hwloc's shape, for the objects below. */
#define SETS "cpuset=\"0x3\" complete_cpuset=\"0x3\" nodeset=\"0x1\" complete_nodeset=\"0x1\""
#define HEAD "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<topology version=\"2.0\">\n"

/* Files that are not hwloc XML topologies, and why. */
static const struct {
    const char *xml, *why;
    size_t len; /* 0: strlen */
} bad[] = {
    /* not well-formed (libxml2's own words after the colon) */
    {"", "line 1: not well-formed XML: Document is empty", 0},
    {"<topology version=\"9.0\">garbage", "line 1: not well-formed XML: ", 0},
    {"<topology version=\"2.0\">\0\0<object", "line 1: not well-formed XML: ", 32},
    {"<topologyversion=\"2.0", "line 1: not well-formed XML: ", 0},
    {"<topologyversion=\"2.0\"", "line 1: not well-formed XML: ", 0},
    {"<topology version=\"2.0\"><object type='Machine", "line 1: not well-formed XML: ", 0},
    {HEAD "<object type=\"Package\" gp_index=\"1 <object type=PU/> 0\"/></topology>",
     "line 3: not well-formed XML: Unescaped '<' not allowed in attributes values", 0},
    {HEAD "<object type=\"NUMANode\" os_indexName\" value=\"x\"/></topology>",
     "line 3: not well-formed XML: ", 0},
    {HEAD "<object type=\"Machine\" cpuset></object></topology>", "line 3: not well-formed XML: ", 0},
    {HEAD "<object type=\"Machine\" " SETS " cpuset=\"8\"/></topology>",
     "line 3: not well-formed XML: Attribute cpuset redefined", 0},
    {"<topology version=\"2.0\" version=\"2.0\">", "line 1: not well-formed XML: Attribute version redefined", 0},
    {HEAD "<object type=\"Package\" " SETS "/>\n<object type=\"PU\" os_index=\"0\"/></object></topology>",
     "line 4: not well-formed XML: Opening and ending tag mismatch", 0},
    {HEAD "<object type=\"Machine\"></topology></object>", "line 3: not well-formed XML: ", 0},
    {HEAD "<object type=\"Machine\" " SETS "/>\n</topology>\n<topology/>", "line 5: not well-formed XML: ", 0},
    {HEAD "<info name=\"\xff\" value=\"x\"/></topology>", "line 3: not well-formed XML: ", 0},
    {HEAD "<info name=\"a\" value=\"&nosuch;\"/></topology>", "line 3: not well-formed XML: ", 0},
    /* well-formed, but not the shape of an hwloc topology */
    {"<root/>", "line 1: the root element is 'root', not 'topology'", 0},
    {"<topology version=\"2.0\" xmlns=\"urn:x\"/>", "line 1: element 'topology': hwloc's element names", 0},
    {"<topology version=\"2.0\" name=\"x\"/>", "line 1: the topology element has attribute 'name'", 0},
    {"<topology version=\"two\"/>", "line 1: topology version 'two' is not a number like 2.0", 0},
    {"<topology version=\"2.\"/>", "line 1: topology version '2.' is not a number like 2.0", 0},
    {"<topology version=\"12345.0\"/>", "line 1: topology version '12345.0' is not a number like 2.0", 0},
    {"<topology version=\"2.0.1\"/>", "line 1: topology version '2.0.1' is not a number like 2.0", 0},
    {"<!DOCTYPE topology [<!ENTITY a \"aaaa\">]>\n<topology version=\"2.0\"/>",
     "the DOCTYPE declares entities or elements of its own", 0},
    {HEAD "<Object type=\"Machine\"/></topology>", "line 3: element 'Object': hwloc's element names", 0},
    {HEAD "<x:object xmlns:x=\"urn:x\" type=\"Machine\"/></topology>", "line 3: element 'object'", 0},
    {HEAD "<object Type=\"Machine\"/></topology>", "line 3: attribute 'Type' of 'object'", 0},
    {HEAD "<object type=\"Machine\" os_index2=\"0\"/></topology>", "line 3: attribute 'os_index2' of 'object'", 0},
    {HEAD "<object type=\"Machine\" " SETS ">\n<info name=\"a\" value=\"b\">\n<object type=\"PU\" os_index=\"0\" "
     SETS "/></info></object></topology>", "line 5: an object inside 'info'", 0},
    {HEAD "<object " SETS "/></topology>", "line 3: object without a type", 0},
    {HEAD "<object type=\"Machine\" " SETS ">PU<info name=\"a\" value=\"b\"/></object></topology>",
     "line 3: 'object' holds both text and elements",
     0},
    {HEAD "<object type=\"Machine\" " SETS "/>\n<distances2 type=\"NUMANode\" nbobjs=\"1\">"
     "<indexes length=\"4\">&lt;0</indexes></distances2></topology>", "line 4: text in 'indexes' holds '<'", 0},
    /* the sets hwloc 2.9.0 dereferences or asserts on */
    {HEAD "<object type=\"Machine\" cpuset=\"0x1\" complete_cpuset=\"0x1\" nodeset=\"0x1\"/></topology>",
     "line 3: object has a cpuset or nodeset but not all of", 0},
    {HEAD "<object type=\"Machine\" cpuset=\"f\" complete_cpuset=\"\" nodeset=\"\" complete_nodeset=\"1\"/>"
     "</topology>", "line 3: object's complete_cpuset '' is not a set hwloc can read", 0},
    {HEAD "<object type=\"Machine\" cpuset=\"f\" complete_cpuset=\"zz\" nodeset=\"1\" complete_nodeset=\"1\"/>"
     "</topology>", "line 3: object's complete_cpuset 'zz' is not a set hwloc can read", 0},
    {HEAD "<object type=\"Machine\" cpuset=\",0x2\" complete_cpuset=\"f\" nodeset=\"1\" complete_nodeset=\"1\"/>"
     "</topology>", "line 3: object's cpuset ',0x2' is not a set hwloc can read", 0},
    {HEAD "<object type=\"Machine\" cpuset=\"1&#10;2\" complete_cpuset=\"f\" nodeset=\"1\" complete_nodeset=\"1\"/>"
     "</topology>", "line 3: object's cpuset '1?2' is not a set hwloc can read", 0},
    {HEAD "\n<object type=\"Machine\" " SETS " allowed_cpuset=\"0x0z\"/></topology>",
     "line 4: object's allowed_cpuset '0x0z' is not a set hwloc can read", 0},
    {HEAD "<object type=\"Machine\" " SETS "/>\n<cpukind cpuset=\",0x1\"/></topology>",
     "line 4: cpukind's cpuset ',0x1' is not a set hwloc can read", 0},
    {HEAD "<object type=\"Machine\" " SETS "/>\n<memattr name=\"Bandwidth\" flags=\"5\">\n<memattr_value "
     "target_obj_type=\"NUMANode\" target_obj_gp_index=\"1\" initiator_cpuset=\"0x\" value=\"1\"/></memattr>"
     "</topology>", "line 5: memattr_value's initiator_cpuset '0x' is not a set hwloc can read", 0},
    /* CPUs the model cannot number */
    {HEAD "<object type=\"Machine\" " SETS ">\n<object type=\"PU\" " SETS "/></object></topology>",
     "line 4: a CPU (PU) without an OS index", 0},
    {HEAD "<object type=\"Machine\" " SETS ">\n<object type=\"PU\" os_index=\"99999\" " SETS "/></object></topology>",
     "line 4: a CPU (PU) with OS index 99999, above 65535", 0},
    {HEAD "<object type=\"Machine\" " SETS ">\n<object type=\"PU\" os_index=\"-1\" " SETS "/></object></topology>",
     "line 4: a CPU (PU) with OS index '-1', not a number", 0},
    {HEAD "<object type=\"Machine\" " SETS ">\n<object type=\"PU\" os_index=\"\" " SETS "/></object></topology>",
     "line 4: a CPU (PU) with OS index '', not a number", 0},
    {HEAD "<object type=\"Machine\" " SETS ">\n<object type=\"pu\" " SETS "/></object></topology>",
     "line 4: a CPU (PU) without an OS index", 0},
    {HEAD "<object type=\"Machine\" " SETS ">\n<object type=\"NUMANode\" os_index=\"4294967295\" " SETS "/>"
     "</object></topology>", "line 4: a NUMA node (NUMANode) with OS index 4294967295, above 65535", 0},
};

/* Each input that crashed hwloc 2.9.0 (or the model) and why it is refused
 * now. The fuzzer mangled most of them beyond what crashed hwloc, so libxml2
 * often stops them first, at an earlier line. */
static const struct {
    const char *file, *why;
} corpus[] = {
    {"crash-bad-allowed-cpuset.xml", "line 4: not well-formed XML: Input is not proper UTF-8"},
    {"crash-cpukind-set-leading-comma.xml", "line 6: cpukind's cpuset ',0x1' is not a set hwloc can read"},
    {"crash-empty-set.xml", "line 1: not well-formed XML: "},
    {"crash-missing-complete-nodeset.xml", "line 9: not well-formed XML: Input is not proper UTF-8"},
    {"crash-nul-bytes.xml", "line 3: not well-formed XML: "},
    {"crash-pu-without-os-index.xml", "line 6: not well-formed XML: Input is not proper UTF-8"},
    {"crash-repeated-attributes.xml", "line 7: not well-formed XML: "},
    {"crash-set-leading-comma.xml", "line 10: not well-formed XML: Unescaped '<' not allowed"},
    {"crash-stray-quote-in-tag.xml", "line 9: not well-formed XML: Specification mandates value for attribute"},
    {"crash-tag-inside-value.xml", "line 7: not well-formed XML: "},
    {"crash-unclosed-quote-long.xml", "line 3: not well-formed XML: "},
    {"crash-unclosed-quote.xml", "line 1: not well-formed XML: "},
    {"crash-unclosed-tag.xml", "line 1: not well-formed XML: "},
    {"duplicate-os-index.xml", "two CPUs have OS index 4"},
    {"timeout-numanode-type-prefix.xml", "line 4: a NUMA node (NUMANode) without an OS index"},
    {"timeout-numanode-without-os-index.xml", "line 4: a NUMA node (NUMANode) without an OS index"},
    {"timeout-pu-without-os-index.xml", "line 2: not well-formed XML: DOCTYPE improperly terminated"},
};

int main(void)
{
    int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    close(fd);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_file(bad[i].xml, bad[i].len ? bad[i].len : strlen(bad[i].xml));
        refused(path, bad[i].why);
    }

    /* Elements nested deeper than any hwloc writes. */
    {
        char *deep = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&deep, &len);
        ASSERT(m);
        fputs("<topology version=\"2.0\">\n", m);
        for (int i = 0; i < 200; i++) fputs("<info>", m);
        for (int i = 0; i < 200; i++) fputs("</info>", m);
        fputs("</topology>\n", m);
        ASSERT_EQ(fclose(m), 0);
        write_file(deep, len);
        free(deep);
        refused(path, "line 2: elements nest more than 128 deep");
    }

    /* Every input of the fuzz corpus that crashed. */
    DIR *d = opendir(FUZZ_CORPUS_DIR);
    if (!d) TEST_FAIL_("%s: %s", FUZZ_CORPUS_DIR, strerror(errno));
    size_t seen = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "crash-", 6) && strncmp(e->d_name, "timeout-", 8) &&
            strncmp(e->d_name, "duplicate-", 10))
            continue;
        char file[4096];
        snprintf(file, sizeof file, "%s/%s", FUZZ_CORPUS_DIR, e->d_name);
        size_t i = 0;
        while (i < sizeof corpus / sizeof corpus[0] && strcmp(corpus[i].file, e->d_name)) i++;
        if (i == sizeof corpus / sizeof corpus[0]) {
            /* one that crashed the model, not hwloc: it loads */
            if (strcmp(e->d_name, "crash-pu-index-outside-cpuset.xml"))
                TEST_FAIL_("%s: not in this test's table of corpus inputs", e->d_name);
            free(printout(file));
            continue;
        }
        refused(file, corpus[i].why);
        seen++;
    }
    closedir(d);
    ASSERT_EQ(seen, sizeof corpus / sizeof corpus[0]);

    /* Well-formed XML in other shapes than hwloc's writer's loads as the same
     * topology: an exported machine rewritten with single quotes, comments,
     * a CDATA section, character references, '>' unescaped in a value, and
     * attributes over several lines. */
    hwloc_topology_t hw;
    char *xml;
    int xlen;
    ASSERT_OK(hwloc_topology_init(&hw));
    ASSERT_OK(hwloc_topology_set_synthetic(hw, "pack:2 l3:1 core:2 pu:2"));
    ASSERT_OK(hwloc_topology_load(hw));
    ASSERT_OK(hwloc_topology_export_xmlbuffer(hw, &xml, &xlen, 0));
    write_file(xml, strlen(xml));
    char *want = printout(path);
    static const struct { const char *from, *to; } edits[] = {
        {"<topology version=\"2.0\">", "<!-- a comment --><topology version='2.0'>\n<?pi data?>"},
        {"type=\"Package\"", "type='Package'\n\t"},
        {"type=\"PU\"", "type\t=\t\"&#80;U\"\n"},
        {"<info name=\"SyntheticDescription\"", "<info name=\"S>y&gt;n\" value=\"a&quot;b\"/><info name=\"x\""},
        {"<object type=\"Core\"", "<!-- between --><object type=\"Core\""},
        {"</topology>", "<distances2 type=\"PU\" nbobjs=\"1\" kind=\"5\" indexing=\"os\">"
                        "<indexes length=\"2\"><![CDATA[0 ]]></indexes>"
                        "<u64values length=\"2\">1 </u64values></distances2></topology>\n<!-- end -->"},
    };
    char *cur = strdup(xml);
    ASSERT(cur);
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        char *next = NULL, *at;
        size_t len = 0;
        FILE *m = open_memstream(&next, &len);
        ASSERT(m);
        const char *p = cur;
        int n = 0;
        for (; (at = strstr(p, edits[i].from)); p = at + strlen(edits[i].from), n++)
            fprintf(m, "%.*s%s", (int)(at - p), p, edits[i].to);
        fputs(p, m);
        ASSERT_EQ(fclose(m), 0);
        if (!n) TEST_FAIL_("edit %zu: '%s' not in hwloc's export", i, edits[i].from);
        free(cur);
        cur = next;
    }
    write_file(cur, strlen(cur));
    char *got = printout(path);
    ASSERT_STR_EQ(got, want);
    free(got);
    free(want);
    free(cur);
    hwloc_free_xmlbuffer(hw, xml);
    hwloc_topology_destroy(hw);
    unlink(path);
    return 0;
}
