/* test_images_import: `eaid images import` (core/images/import.c) on
 * archives this test writes with libarchive: OCI layouts (directory and
 * tar), `docker save` archives, and hostile ones (escaping paths, symlinked
 * parents, bad digests, size bombs).  Every failed import must leave
 * nothing behind. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <archive.h>
#include <archive_entry.h>
#include <jansson.h>

#include "base/util.h"
#include "images/images.h"

static char g_dir[PATH_MAX];     /* scratch */
static char g_store[PATH_MAX];   /* image store */
static char g_outside[PATH_MAX]; /* a directory a hostile archive aims at */
static int g_seq;
static int g_bad_cmd; /* make_oci writes a malformed config.Cmd */

enum { F, D, L, H, C, W }; /* file, dir, symlink, hardlink, char device, fifo */
struct ent {
    int type;
    const char *path;
    int mode;
    const char *data; /* file content, or link target */
    size_t size;      /* 0: strlen(data) */
};

static int g_gnu; /* write GNU tar (long names as ././@LongLink) instead of pax */

static int write_tar(const char *path, int gzip, const struct ent *e, size_t n)
{
    struct archive *a = archive_write_new();
    if (g_gnu)
        archive_write_set_format_gnutar(a);
    else
        archive_write_set_format_pax_restricted(a);
    if (gzip)
        archive_write_add_filter_gzip(a);
    if (archive_write_open_filename(a, path) != ARCHIVE_OK)
        return -1;
    for (size_t i = 0; i < n; i++) {
        struct archive_entry *ae = archive_entry_new();
        archive_entry_set_pathname(ae, e[i].path);
        archive_entry_set_mtime(ae, 1700000000, 0);
        archive_entry_set_uid(ae, 0);
        archive_entry_set_gid(ae, 0);
        size_t sz = 0;
        switch (e[i].type) {
        case F:
            sz = e[i].size ? e[i].size : strlen(e[i].data);
            archive_entry_set_filetype(ae, AE_IFREG);
            archive_entry_set_size(ae, (la_int64_t)sz);
            break;
        case D:
            archive_entry_set_filetype(ae, AE_IFDIR);
            break;
        case L:
            archive_entry_set_filetype(ae, AE_IFLNK);
            archive_entry_set_symlink(ae, e[i].data);
            break;
        case H:
            archive_entry_set_filetype(ae, AE_IFREG);
            archive_entry_set_hardlink(ae, e[i].data);
            break;
        case C:
            archive_entry_set_filetype(ae, AE_IFCHR);
            archive_entry_set_rdev(ae, makedev(1, 3));
            break;
        case W:
            archive_entry_set_filetype(ae, AE_IFIFO);
            break;
        }
        archive_entry_set_perm(ae, (mode_t)(e[i].mode ? e[i].mode : (e[i].type == D ? 0755 : 0644)));
        if (archive_write_header(a, ae) != ARCHIVE_OK)
            return -1;
        if (e[i].type == F) {
            if (e[i].size) {
                char *big = calloc(1, sz);
                archive_write_data(a, big, sz);
                free(big);
            } else {
                archive_write_data(a, e[i].data, sz);
            }
        }
        archive_entry_free(ae);
    }
    archive_write_close(a);
    archive_write_free(a);
    return 0;
}

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)sz + 1);
    *n = fread(b, 1, (size_t)sz, f);
    b[*n] = '\0';
    fclose(f);
    return b;
}

static void sh(const char *fmt, const char *a, const char *b)
{
    char cmd[4 * PATH_MAX];
    snprintf(cmd, sizeof(cmd), fmt, a, b);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
}

/* Move file into layout/blobs/sha256/<hex>; descriptor json. */
static json_t *add_blob(const char *layout, const char *file, const char *mt)
{
    size_t n;
    char *b = slurp(file, &n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    char hex[65], dst[PATH_MAX + 128], dg[80];
    eai_sha256_hex(b, n, hex);
    free(b);
    snprintf(dst, sizeof(dst), "%s/blobs/sha256/%s", layout, hex);
    sh("mkdir -p '%s/blobs/sha256' && true '%s'", layout, "");
    CU_ASSERT_EQUAL(rename(file, dst), 0);
    snprintf(dg, sizeof(dg), "sha256:%s", hex);
    return json_pack("{s:s, s:s, s:I}", "mediaType", mt, "digest", dg, "size", (json_int_t)n);
}

static json_t *add_json_blob(const char *layout, json_t *j, const char *mt)
{
    char tmp[PATH_MAX + 32];
    snprintf(tmp, sizeof(tmp), "%s/tmp.json", layout);
    json_dump_file(j, tmp, JSON_COMPACT);
    json_decref(j);
    return add_blob(layout, tmp, mt);
}

/* An OCI layout in a fresh directory from layer tars (already written);
 * returns the layout path in out and the manifest digest in digest. */
static void make_oci(char *out, size_t len, const char *const *layers, size_t n, char digest[80])
{
    snprintf(out, len, "%s/oci-%d", g_dir, ++g_seq);
    CU_ASSERT_EQUAL_FATAL(mkdir(out, 0755), 0);
    json_t *ls = json_array(), *diff = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(ls, add_blob(out, layers[i], "application/vnd.oci.image.layer.v1.tar+gzip"));
        json_array_append_new(diff, json_string("sha256:unchecked"));
    }
    json_t *cfg = json_pack("{s:s, s:s, s:{s:s, s:o}, s:{s:[s], s:[s], s:[s,s]}}", "architecture", "amd64", "os",
                            "linux", "rootfs", "type", "layers", "diff_ids", diff, "config", "Env", "PATH=/bin",
                            "Entrypoint", "/bin/tool", "Cmd", "--flag", "x y");
    if (g_bad_cmd) /* an image config whose Cmd is not an array: the import fails */
        json_object_set_new(json_object_get(cfg, "config"), "Cmd", json_string("echo hi"));
    json_t *cd = add_json_blob(out, cfg, "application/vnd.oci.image.config.v1+json");
    json_t *man = json_pack("{s:i, s:s, s:o, s:o}", "schemaVersion", 2, "mediaType",
                            "application/vnd.oci.image.manifest.v1+json", "config", cd, "layers", ls);
    json_t *md = add_json_blob(out, man, "application/vnd.oci.image.manifest.v1+json");
    snprintf(digest, 80, "%s", json_string_value(json_object_get(md, "digest")));
    json_t *idx = json_pack("{s:i, s:s, s:[o]}", "schemaVersion", 2, "mediaType",
                            "application/vnd.oci.image.index.v1+json", "manifests", md);
    char p[PATH_MAX + 32];
    snprintf(p, sizeof(p), "%s/index.json", out);
    json_dump_file(idx, p, JSON_COMPACT);
    json_decref(idx);
    snprintf(p, sizeof(p), "%s/oci-layout", out);
    FILE *f = fopen(p, "w");
    fputs("{\"imageLayoutVersion\":\"1.0.0\"}", f);
    fclose(f);
}

static char *layer_path(void)
{
    static char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/layer-%d.tar", g_dir, ++g_seq);
    return p;
}

static int import(const char *ref, const char *src, const char *extra)
{
    char *argv[8] = {"import", (char *)ref, (char *)src, NULL, NULL, NULL};
    int argc = 3;
    char buf[64];
    if (extra) {
        snprintf(buf, sizeof(buf), "%s", extra);
        argv[argc++] = "--max-size";
        argv[argc++] = buf;
    }
    argv[argc] = NULL;
    return eai_images_cli(g_store, argc, argv);
}

static int exists(const char *rel)
{
    char p[PATH_MAX * 2];
    struct stat st;
    snprintf(p, sizeof(p), "%s/%s", g_store, rel);
    return lstat(p, &st) == 0;
}

static mode_t mode_of(const char *rel)
{
    char p[PATH_MAX * 2];
    struct stat st;
    snprintf(p, sizeof(p), "%s/%s", g_store, rel);
    return lstat(p, &st) == 0 ? st.st_mode : 0;
}

static char *read_rel(const char *rel)
{
    char p[PATH_MAX * 2];
    size_t n;
    snprintf(p, sizeof(p), "%s/%s", g_store, rel);
    return slurp(p, &n);
}

static int init(void)
{
    const char *bd = getenv("EAI_BUILD_DIR");
    snprintf(g_dir, sizeof(g_dir), "%s/import-test-XXXXXX", bd ? bd : "/tmp");
    if (!mkdtemp(g_dir))
        return -1;
    snprintf(g_store, sizeof(g_store), "%s/store", g_dir);
    snprintf(g_outside, sizeof(g_outside), "%s/outside", g_dir);
    return mkdir(g_store, 0755) == 0 && mkdir(g_outside, 0755) == 0 ? 0 : -1;
}

static int clean(void)
{
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Two layers: whiteouts, opaque directory, setuid, device, links. */
static void two_layers(const char *l1, const char *l2)
{
    static const struct ent e1[] = {
        {D, "./", 0755, NULL, 0},
        {D, "bin", 0755, NULL, 0},
        {F, "bin/tool", 04755, "#!/bin/sh\necho tool\n", 0},
        {F, "bin/sgid", 02755, "g", 0},
        {D, "a", 0755, NULL, 0},
        {F, "a/keep", 0644, "keep", 0},
        {F, "a/old", 0644, "old", 0},
        {D, "a/olddir", 0755, NULL, 0},
        {F, "a/olddir/f", 0644, "f", 0},
        {D, "opq", 0755, NULL, 0},
        {F, "opq/lower", 0644, "lower", 0},
        {C, "dev-null", 0666, NULL, 0},
        {W, "fifo", 0644, NULL, 0},
        {L, "abs-link", 0, "/etc/passwd", 0},
        {D, "replaced", 0755, NULL, 0},
        {F, "replaced/x", 0644, "x", 0},
    };
    static const struct ent e2[] = {
        {F, "opq/new", 0644, "new", 0},   /* before the opaque marker: must survive it */
        {F, "opq/.wh..wh..opq", 0644, "", 0},
        {F, "a/.wh.old", 0644, "", 0},
        {F, "a/.wh.olddir", 0644, "", 0},
        {F, "a/added", 0644, "added", 0},
        {H, "bin/tool-link", 0, "bin/tool", 0},
        {L, "replaced", 0, "a", 0}, /* a symlink replaces a directory */
    };
    CU_ASSERT_EQUAL_FATAL(write_tar(l1, 1, e1, sizeof(e1) / sizeof(e1[0])), 0);
    CU_ASSERT_EQUAL_FATAL(write_tar(l2, 0, e2, sizeof(e2) / sizeof(e2[0])), 0);
}

static void check_two_layers(const char *img)
{
    char p[256];
#define R(x) (snprintf(p, sizeof(p), "%s/rootfs/%s", img, x), p)
    char *s = read_rel(R("bin/tool"));
    CU_ASSERT_PTR_NOT_NULL(s);
    if (s)
        CU_ASSERT_STRING_EQUAL(s, "#!/bin/sh\necho tool\n");
    free(s);
    CU_ASSERT_EQUAL(mode_of(R("bin/tool")) & 07777, 0755); /* setuid dropped */
    CU_ASSERT_EQUAL(mode_of(R("bin/sgid")) & 07777, 0755); /* setgid dropped */
    CU_ASSERT_TRUE(exists(R("a/keep")));
    CU_ASSERT_TRUE(exists(R("a/added")));
    CU_ASSERT_FALSE(exists(R("a/old")));
    CU_ASSERT_FALSE(exists(R("a/.wh.old")));
    CU_ASSERT_FALSE(exists(R("a/olddir")));
    CU_ASSERT_FALSE(exists(R("opq/lower")));
    CU_ASSERT_TRUE(exists(R("opq/new")));
    CU_ASSERT_FALSE(exists(R("opq/.wh..wh..opq")));
    CU_ASSERT_FALSE(exists(R("dev-null"))); /* device dropped */
    CU_ASSERT_TRUE(S_ISFIFO(mode_of(R("fifo"))));
    CU_ASSERT_TRUE(S_ISLNK(mode_of(R("abs-link"))));
    CU_ASSERT_TRUE(S_ISLNK(mode_of(R("replaced"))));
    CU_ASSERT_TRUE(S_ISREG(mode_of(R("bin/tool-link"))));
    char a[PATH_MAX * 2], b[PATH_MAX * 2];
    struct stat sa, sb;
    snprintf(a, sizeof(a), "%s/%s", g_store, R("bin/tool"));
    snprintf(b, sizeof(b), "%s/%s", g_store, R("bin/tool-link"));
    CU_ASSERT_TRUE(lstat(a, &sa) == 0 && lstat(b, &sb) == 0 && sa.st_ino == sb.st_ino);
#undef R
}

static void test_oci_dir(void)
{
    char l1[PATH_MAX], l2[PATH_MAX], lay[PATH_MAX], dg[80];
    snprintf(l1, sizeof(l1), "%s", layer_path());
    snprintf(l2, sizeof(l2), "%s", layer_path());
    two_layers(l1, l2);
    const char *ls[] = {l1, l2};
    make_oci(lay, sizeof(lay), ls, 2, dg);
    CU_ASSERT_EQUAL(import("ocidir:1", lay, NULL), 0);
    check_two_layers("ocidir/1");
    /* meta.json records the manifest digest */
    char *m = read_rel("ocidir/1/meta.json");
    json_t *j = m ? json_loads(m, 0, NULL) : NULL;
    free(m);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "digest")), dg);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "format")), "oci");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(j, "dropped"), "devices")), 1);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(j, "dropped"), "setid_bits")), 2);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(j, "layers")), 2);
    /* and the image's own command: config.Entrypoint + config.Cmd */
    json_t *want = json_pack("[s,s,s]", "/bin/tool", "--flag", "x y"), *cmd = NULL;
    CU_ASSERT_TRUE(json_equal(json_object_get(j, "command"), want));
    CU_ASSERT_EQUAL(eai_images_command(g_store, "ocidir:1", &cmd), 0);
    CU_ASSERT_TRUE(cmd && json_equal(cmd, want));
    json_decref(cmd);
    json_decref(want);
    CU_ASSERT_EQUAL(eai_images_command(g_store, "nothere:1", &cmd), -1);
    json_decref(j);
    char out[PATH_MAX];
    CU_ASSERT_EQUAL(eai_images_resolve(g_store, "ocidir:1", out, sizeof(out)), 0);
    /* The same tag again: refused without --force, replaced with it. */
    CU_ASSERT_EQUAL(import("ocidir:1", lay, NULL), 1);
    char *argv[] = {"import", "ocidir:1", lay, "--force", NULL};
    CU_ASSERT_EQUAL(eai_images_cli(g_store, 4, argv), 0);
    check_two_layers("ocidir/1");
    /* The OCI layout as a tar (what skopeo's oci-archive: writes). */
    char tarp[PATH_MAX + 16];
    snprintf(tarp, sizeof(tarp), "%s.tar", lay);
    sh("tar -C '%s' -cf '%s' .", lay, tarp);
    CU_ASSERT_EQUAL(import("ocitar", tarp, NULL), 0);
    check_two_layers("ocitar/latest");
    CU_ASSERT_FALSE(exists("ocitar/latest/archive"));
    /* a config.Cmd that is not an array: refused, nothing left */
    snprintf(l1, sizeof(l1), "%s", layer_path());
    snprintf(l2, sizeof(l2), "%s", layer_path());
    two_layers(l1, l2);
    g_bad_cmd = 1;
    make_oci(lay, sizeof(lay), ls, 2, dg);
    g_bad_cmd = 0;
    CU_ASSERT_EQUAL(import("badcmd:1", lay, NULL), 1);
    CU_ASSERT_FALSE(exists("badcmd"));
}

/* `docker save`: manifest.json, <hex>.json config, <id>/layer.tar, one of
 * them a symlink to the other (docker writes duplicate layers so). */
static void test_docker_save(void)
{
    char d[PATH_MAX], l1[PATH_MAX], l2[PATH_MAX];
    snprintf(d, sizeof(d), "%s/docker-%d", g_dir, ++g_seq);
    sh("mkdir -p '%s/aaa' '%s/bbb'", d, d);
    snprintf(l1, sizeof(l1), "%s/aaa/layer.tar", d);
    snprintf(l2, sizeof(l2), "%s/bbb/layer.tar", d);
    two_layers(l1, l2);
    size_t n1, n2;
    char *b1 = slurp(l1, &n1), *b2 = slurp(l2, &n2);
    char h1[65], h2[65], d1[80], d2[80];
    eai_sha256_hex(b1, n1, h1);
    eai_sha256_hex(b2, n2, h2);
    free(b1);
    free(b2);
    snprintf(d1, sizeof(d1), "sha256:%s", h1);
    snprintf(d2, sizeof(d2), "sha256:%s", h2);
    /* a third layer: the first again, as a symlink */
    char ccc[PATH_MAX + 16];
    snprintf(ccc, sizeof(ccc), "%s/ccc", d);
    CU_ASSERT_EQUAL(mkdir(ccc, 0755), 0);
    strcat(ccc, "/layer.tar");
    CU_ASSERT_EQUAL(symlink("../aaa/layer.tar", ccc), 0);
    json_t *cfg = json_pack("{s:s, s:s, s:{s:s, s:[s,s,s]}}", "architecture", "amd64", "os", "linux", "rootfs",
                            "type", "layers", "diff_ids", d1, d2, d1);
    char *cs = json_dumps(cfg, JSON_COMPACT);
    json_decref(cfg);
    char ch[65], cp[PATH_MAX + 80];
    eai_sha256_hex(cs, strlen(cs), ch);
    snprintf(cp, sizeof(cp), "%s/%s.json", d, ch);
    FILE *f = fopen(cp, "w");
    fputs(cs, f);
    fclose(f);
    free(cs);
    char cname[80];
    snprintf(cname, sizeof(cname), "%s.json", ch);
    json_t *mf = json_pack("[{s:s, s:[s], s:[s,s,s]}]", "Config", cname, "RepoTags", "example/app:1", "Layers",
                           "aaa/layer.tar", "bbb/layer.tar", "ccc/layer.tar");
    snprintf(cp, sizeof(cp), "%s/manifest.json", d);
    json_dump_file(mf, cp, JSON_COMPACT);
    json_decref(mf);
    char tarp[PATH_MAX + 16];
    snprintf(tarp, sizeof(tarp), "%s.tar", d);
    sh("tar -C '%s' -cf '%s' .", d, tarp);
    CU_ASSERT_EQUAL(import("dock:1", tarp, NULL), 0);
    /* layer 3 (= layer 1) brings back what layer 2 removed */
    char *k = read_rel("dock/1/rootfs/a/old");
    CU_ASSERT_PTR_NOT_NULL(k);
    free(k);
    char *m = read_rel("dock/1/meta.json");
    json_t *j = m ? json_loads(m, 0, NULL) : NULL;
    free(m);
    char want[80];
    snprintf(want, sizeof(want), "sha256:%s", ch);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "digest")), want);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "format")), "docker-archive");
    /* a config without Entrypoint or Cmd: no command of its own */
    CU_ASSERT_PTR_NULL(json_object_get(j, "command"));
    json_t *own = json_true();
    CU_ASSERT_EQUAL(eai_images_command(g_store, "dock:1", &own), 0);
    CU_ASSERT_PTR_NULL(own);
    json_decref(j);
    /* A tampered layer: the diff_id no longer matches. */
    f = fopen(l2, "r+b");
    fseek(f, 600, SEEK_SET);
    fputc('Z', f);
    fclose(f);
    snprintf(cp, sizeof(cp), "tar -C '%s' -cf '%s' .", d, tarp);
    CU_ASSERT_EQUAL(system(cp), 0);
    CU_ASSERT_EQUAL(import("dock:2", tarp, NULL), 1);
    CU_ASSERT_FALSE(exists("dock/2"));
}

/* A hostile OCI image (one or two layers) must fail and leave nothing. */
static void hostile2(const char *what, const struct ent *e, size_t n, const struct ent *e2, size_t n2,
                     const char *max)
{
    char l[PATH_MAX], l2[PATH_MAX], lay[PATH_MAX], dg[80], ref[64], name[64];
    snprintf(l, sizeof(l), "%s", layer_path());
    CU_ASSERT_EQUAL_FATAL(write_tar(l, 1, e, n), 0);
    snprintf(l2, sizeof(l2), "%s", layer_path());
    if (e2)
        CU_ASSERT_EQUAL_FATAL(write_tar(l2, 0, e2, n2), 0);
    const char *ls[] = {l, l2};
    make_oci(lay, sizeof(lay), ls, e2 ? 2 : 1, dg);
    snprintf(name, sizeof(name), "evil%d", g_seq);
    snprintf(ref, sizeof(ref), "%s:1", name);
    int rc = import(ref, lay, max);
    if (rc != 1)
        fprintf(stderr, "hostile '%s' imported (rc %d)\n", what, rc);
    CU_ASSERT_EQUAL(rc, 1);
    CU_ASSERT_FALSE(exists(name)); /* nothing left: no tag, no .import-*, no name dir */
}

static void hostile(const char *what, const struct ent *e, size_t n, const char *max)
{
    hostile2(what, e, n, NULL, 0, max);
}

static void test_hostile_layers(void)
{
    const struct ent dotdot[] = {{F, "ok", 0, "x", 0}, {F, "../escape", 0, "x", 0}};
    hostile("..", dotdot, 2, NULL);
    const struct ent dotdot2[] = {{F, "a/b/../../../escape", 0, "x", 0}};
    hostile("a/b/../../..", dotdot2, 1, NULL);
    const struct ent abs[] = {{F, "/etc/evil", 0, "x", 0}};
    hostile("absolute", abs, 1, NULL);
    struct ent via_link[] = {{L, "lnk", 0, g_outside, 0}, {F, "lnk/pwned", 0, "x", 0}};
    hostile("through a symlink", via_link, 2, NULL);
    struct ent via_rel[] = {{L, "up", 0, "../../../../../../..", 0}, {D, "up/tmp", 0, NULL, 0}};
    hostile("through a relative symlink", via_rel, 2, NULL);
    const struct ent file_parent[] = {{F, "f", 0, "x", 0}, {F, "f/child", 0, "x", 0}};
    hostile("file as parent", file_parent, 2, NULL);
    const struct ent hl[] = {{H, "passwd", 0, "../../../../etc/passwd", 0}};
    hostile("hard link out", hl, 1, NULL);
    const struct ent hl_abs[] = {{H, "passwd", 0, "/etc/passwd", 0}};
    hostile("absolute hard link", hl_abs, 1, NULL);
    /* a whiteout that would delete outside through a lower layer's symlink */
    char victim[PATH_MAX + 16];
    snprintf(victim, sizeof(victim), "%s/victim", g_outside);
    FILE *vf = fopen(victim, "w");
    fclose(vf);
    struct ent wh1[] = {{L, "lnk", 0, g_outside, 0}};
    const struct ent wh2[] = {{F, "lnk/.wh.victim", 0, "", 0}};
    hostile2("whiteout through a symlink", wh1, 1, wh2, 1, NULL);
    const struct ent opq2[] = {{F, "lnk/.wh..wh..opq", 0, "", 0}};
    hostile2("opaque whiteout through a symlink", wh1, 1, opq2, 1, NULL);
    CU_ASSERT_EQUAL(access(victim, F_OK), 0);
    const struct ent bomb[] = {{F, "zeros", 0, NULL, 2 << 20}};
    hostile("over --max-size", bomb, 1, "1M");
    /* The outside directory is untouched. */
    char p[PATH_MAX + 16];
    snprintf(p, sizeof(p), "%s/pwned", g_outside);
    CU_ASSERT_EQUAL(access(p, F_OK), -1);
    /* and the cap is not a guess: the same bomb fits in 3M */
    char l[PATH_MAX], lay[PATH_MAX], dg[80];
    snprintf(l, sizeof(l), "%s", layer_path());
    CU_ASSERT_EQUAL_FATAL(write_tar(l, 1, bomb, 1), 0);
    const char *ls[] = {l};
    make_oci(lay, sizeof(lay), ls, 1, dg);
    CU_ASSERT_EQUAL(import("fits:1", lay, "3M"), 0);
}

static void test_bad_digests(void)
{
    const struct ent e[] = {{F, "hello", 0, "hello", 0}};
    char l[PATH_MAX], lay[PATH_MAX], dg[80], p[PATH_MAX * 2];
    snprintf(l, sizeof(l), "%s", layer_path());
    CU_ASSERT_EQUAL_FATAL(write_tar(l, 1, e, 1), 0);
    const char *ls[] = {l};
    make_oci(lay, sizeof(lay), ls, 1, dg);
    /* swap the manifest blob's content for other bytes of the same size */
    snprintf(p, sizeof(p), "%s/blobs/sha256/%s", lay, dg + 7);
    size_t n;
    char *b = slurp(p, &n);
    b[n - 2] = b[n - 2] == ']' ? '}' : ']';
    FILE *f = fopen(p, "wb");
    fwrite(b, 1, n, f);
    fclose(f);
    free(b);
    CU_ASSERT_EQUAL(import("baddigest:1", lay, NULL), 1);
    CU_ASSERT_FALSE(exists("baddigest"));
    /* a missing layer blob */
    snprintf(l, sizeof(l), "%s", layer_path());
    CU_ASSERT_EQUAL_FATAL(write_tar(l, 1, e, 1), 0);
    b = slurp(l, &n);
    char lh[65];
    eai_sha256_hex(b, n, lh);
    free(b);
    make_oci(lay, sizeof(lay), ls, 1, dg);
    snprintf(p, sizeof(p), "%s/blobs/sha256/%s", lay, lh);
    CU_ASSERT_EQUAL(unlink(p), 0);
    CU_ASSERT_EQUAL(import("badblob:1", lay, NULL), 1);
    CU_ASSERT_FALSE(exists("badblob"));
    /* neither layout nor docker archive; not a tar */
    CU_ASSERT_EQUAL(import("junk:1", g_outside, NULL), 1);
    snprintf(p, sizeof(p), "%s/junk.tar", g_dir);
    f = fopen(p, "w");
    fputs("this is not a tar archive", f);
    fclose(f);
    CU_ASSERT_EQUAL(import("junk:1", p, NULL), 1);
    CU_ASSERT_FALSE(exists("junk"));
}

static void test_hostile_outer(void)
{
    /* the outer tar itself tries to write outside */
    char p[PATH_MAX + 32];
    snprintf(p, sizeof(p), "%s/outer-%d.tar", g_dir, ++g_seq);
    const struct ent e[] = {{F, "oci-layout", 0, "{\"imageLayoutVersion\":\"1.0.0\"}", 0},
                            {F, "../../outer-escape", 0, "x", 0}};
    CU_ASSERT_EQUAL_FATAL(write_tar(p, 0, e, 2), 0);
    CU_ASSERT_EQUAL(import("outer:1", p, NULL), 1);
    CU_ASSERT_FALSE(exists("outer"));
    char q[PATH_MAX + 32];
    snprintf(q, sizeof(q), "%s/outer-escape", g_store);
    CU_ASSERT_EQUAL(access(q, F_OK), -1);
    const struct ent e2[] = {{L, "blobs", 0, "/etc", 0}, {F, "oci-layout", 0, "{}", 0}};
    CU_ASSERT_EQUAL_FATAL(write_tar(p, 0, e2, 2), 0);
    CU_ASSERT_EQUAL(import("outer:2", p, NULL), 1);
    CU_ASSERT_FALSE(exists("outer"));
}

/* Names past ustar's 100 characters: pax headers and GNU long names. */
static void test_long_names(void)
{
    static char dir[400], file[480], target[480];
    memset(dir, 0, sizeof(dir));
    for (int i = 0; i < 6; i++)
        strcat(dir, i ? "/a-rather-long-directory-name-for-tests" : "a-rather-long-directory-name-for-tests");
    snprintf(file, sizeof(file), "%s/file-with-a-long-name.txt", dir);
    snprintf(target, sizeof(target), "/%s", file);
    const struct ent e[] = {{D, dir, 0755, NULL, 0}, {F, file, 0644, "long", 0}, {L, "short-link", 0, target, 0}};
    for (g_gnu = 0; g_gnu < 2; g_gnu++) {
        char l[PATH_MAX], lay[PATH_MAX], dg[80], ref[32], rel[600];
        snprintf(l, sizeof(l), "%s", layer_path());
        CU_ASSERT_EQUAL_FATAL(write_tar(l, 1, e, 3), 0);
        const char *ls[] = {l};
        make_oci(lay, sizeof(lay), ls, 1, dg);
        snprintf(ref, sizeof(ref), "long:%s", g_gnu ? "gnu" : "pax");
        CU_ASSERT_EQUAL(import(ref, lay, NULL), 0);
        snprintf(rel, sizeof(rel), "long/%s/rootfs/%s", g_gnu ? "gnu" : "pax", file);
        char *got = read_rel(rel);
        CU_ASSERT_PTR_NOT_NULL(got);
        if (got)
            CU_ASSERT_STRING_EQUAL(got, "long");
        free(got);
        char lp[PATH_MAX * 2], t[PATH_MAX];
        snprintf(lp, sizeof(lp), "%s/long/%s/rootfs/short-link", g_store, g_gnu ? "gnu" : "pax");
        ssize_t k = readlink(lp, t, sizeof(t) - 1);
        CU_ASSERT_TRUE(k > 0 && (size_t)k == strlen(target) && !memcmp(t, target, (size_t)k));
    }
    g_gnu = 0;
}

static void test_usage(void)
{
    char *a1[] = {"import", "Bad/Name", "x", NULL};
    CU_ASSERT_EQUAL(eai_images_cli(g_store, 3, a1), 2);
    char *a2[] = {"import", "ok:1", NULL};
    CU_ASSERT_EQUAL(eai_images_cli(g_store, 2, a2), 2);
    char *a3[] = {"import", "ok:1", "/nonexistent/archive.tar", NULL};
    CU_ASSERT_EQUAL(eai_images_cli(g_store, 3, a3), 2);
    char *a4[] = {"import", "ok:1", g_outside, "--max-size", "-5", NULL};
    CU_ASSERT_EQUAL(eai_images_cli(g_store, 5, a4), 2);
    /* images build: a package name starting with '-' would be an option */
    char *b1[] = {"build", "ok:1", "--packages", "-oAPT::Get::AllowUnauthenticated=1", NULL};
    CU_ASSERT_EQUAL(eai_images_cli(g_store, 4, b1), 2);
    char *b2[] = {"build", "ok:1", "--packages", "python3,--foo", NULL};
    CU_ASSERT_EQUAL(eai_images_cli(g_store, 4, b2), 2);
    char *b3[] = {"build", "ok:1", "--packages", "python3,,x", NULL};
    CU_ASSERT_EQUAL(eai_images_cli(g_store, 4, b3), 2);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite s = CU_add_suite("images import", init, clean);
    CU_add_test(s, "OCI layout (dir and tar), whiteouts, --force", test_oci_dir);
    CU_add_test(s, "docker save archive", test_docker_save);
    CU_add_test(s, "hostile layers leave nothing", test_hostile_layers);
    CU_add_test(s, "bad digests", test_bad_digests);
    CU_add_test(s, "hostile outer archive", test_hostile_outer);
    CU_add_test(s, "long names (pax, GNU)", test_long_names);
    CU_add_test(s, "usage", test_usage);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned f = CU_get_number_of_failures() + CU_get_number_of_suites_failed();
    CU_cleanup_registry();
    return f ? 1 : 0;
}
