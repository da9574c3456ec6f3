/* `eaid images import`: the formats, an OCI image layout or a `docker save`
 * archive, read into a plan of verified blobs (import_int.h). */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "images/images_int.h"
#include "images/import_int.h"

/* ------------------------------------------------------------ formats */

void imp_plan_free(struct plan *p)
{
    json_decref(p->command);
    for (size_t i = 0; i < p->nlayers; i++)
        free(p->layers[i]);
}

static int is_index_type(const char *mt)
{
    return mt && (!strcmp(mt, "application/vnd.oci.image.index.v1+json") ||
                  !strcmp(mt, "application/vnd.docker.distribution.manifest.list.v2+json"));
}

/* The manifest descriptor of an index: the only one, else linux/amd64. */
static json_t *pick_manifest(json_t *index)
{
    json_t *ms = json_object_get(index, "manifests");
    if (!json_is_array(ms) || json_array_size(ms) == 0)
        return NULL;
    if (json_array_size(ms) == 1)
        return json_array_get(ms, 0);
    size_t i;
    json_t *m;
    json_array_foreach(ms, i, m)
    {
        json_t *pf = json_object_get(m, "platform");
        const char *os = json_string_value(json_object_get(pf, "os"));
        const char *arch = json_string_value(json_object_get(pf, "architecture"));
        if (os && arch && !strcmp(os, "linux") && !strcmp(arch, "amd64"))
            return m;
    }
    return NULL;
}

/* The image's own command from its config (already verified against its digest). */
static int plan_command(const json_t *cfg, struct plan *p)
{
    char why[200];
    if (!json_is_object(cfg)) {
        FAIL("config %s: not a JSON object", p->config);
        return -1;
    }
    if (eai_images_command_from_config(cfg, &p->command, why, sizeof(why)) < 0) {
        FAIL("config %s: %s", p->config, why);
        return -1;
    }
    return 0;
}

int imp_plan_oci(int layoutfd, struct plan *p)
{
    json_t *lay = imp_load_json_at(layoutfd, "oci-layout");
    const char *ver = json_string_value(json_object_get(lay, "imageLayoutVersion"));
    if (!ver || strcmp(ver, "1.0.0") != 0) {
        json_decref(lay);
        FAIL("oci-layout: imageLayoutVersion is not 1.0.0");
        return -1;
    }
    json_decref(lay);
    json_t *index = imp_load_json_at(layoutfd, "index.json");
    if (!index) {
        FAIL("index.json: missing or invalid");
        return -1;
    }
    json_t *manifest = NULL;
    int rc = -1;
    char path[PATH_MAX], dg[72];
    json_t *cur = index;
    for (int depth = 0; depth < 3; depth++) {
        json_t *desc = pick_manifest(cur);
        if (!desc) {
            FAIL("index: no manifest (or several and none for linux/amd64)");
            goto out;
        }
        const char *mt = json_string_value(json_object_get(desc, "mediaType"));
        if (imp_verify_descriptor(layoutfd, desc, path, sizeof(path), dg) < 0)
            goto out;
        json_t *j = imp_load_json_at(layoutfd, path);
        if (!j) {
            FAIL("manifest %s: not JSON", dg);
            goto out;
        }
        const char *inner = json_string_value(json_object_get(j, "mediaType"));
        int nested = is_index_type(mt) || is_index_type(inner) || json_is_array(json_object_get(j, "manifests"));
        if (cur != index)
            json_decref(cur); /* desc and mt belonged to it */
        if (nested) {
            cur = j;
            continue;
        }
        manifest = j;
        cur = index;
        break;
    }
    if (cur != index)
        json_decref(cur);
    if (!manifest) {
        FAIL("index: nested too deep");
        goto out;
    }
    snprintf(p->format, sizeof(p->format), "oci");
    snprintf(p->digest, sizeof(p->digest), "%s", dg);
    if (imp_verify_descriptor(layoutfd, json_object_get(manifest, "config"), path, sizeof(path), p->config) < 0)
        goto out;
    json_t *cfg = imp_load_json_at(layoutfd, path);
    int crc = plan_command(cfg, p);
    json_decref(cfg);
    if (crc < 0)
        goto out;
    json_t *layers = json_object_get(manifest, "layers");
    if (!json_is_array(layers) || json_array_size(layers) > IMP_MAX_LAYERS) {
        FAIL("manifest %s: layers missing or more than %d", p->digest, IMP_MAX_LAYERS);
        goto out;
    }
    size_t i;
    json_t *l;
    json_array_foreach(layers, i, l)
    {
        const char *mt = json_string_value(json_object_get(l, "mediaType"));
        if (mt && (strstr(mt, "nondistributable") || strstr(mt, "foreign"))) {
            FAIL("layer %zu: media type %s is not in the archive", i, mt);
            goto out;
        }
        if (imp_verify_descriptor(layoutfd, l, path, sizeof(path), p->layer_digest[p->nlayers]) < 0)
            goto out;
        if (!(p->layers[p->nlayers] = strdup(path)))
            goto out;
        p->nlayers++;
    }
    rc = 0;
out:
    json_decref(manifest);
    json_decref(index);
    return rc;
}

int imp_plan_docker(int layoutfd, const char *ref, struct plan *p)
{
    json_t *mf = imp_load_json_at(layoutfd, "manifest.json");
    int rc = -1;
    json_t *cfg = NULL;
    if (!json_is_array(mf) || json_array_size(mf) == 0) {
        FAIL("manifest.json: not a non-empty array");
        goto out;
    }
    json_t *ent = json_array_get(mf, 0);
    if (json_array_size(mf) > 1) { /* several images: the one tagged like the import, else refuse */
        ent = NULL;
        size_t i, k;
        json_t *m, *t;
        json_array_foreach(mf, i, m)
        {
            json_array_foreach(json_object_get(m, "RepoTags"), k, t)
            {
                const char *s = json_string_value(t);
                size_t sl = s ? strlen(s) : 0, rl = strlen(ref);
                if (s && sl >= rl && !strcmp(s + sl - rl, ref))
                    ent = m;
            }
        }
        if (!ent) {
            FAIL("manifest.json: %zu images and none tagged %s", json_array_size(mf), ref);
            goto out;
        }
    }
    const char *cpath = json_string_value(json_object_get(ent, "Config"));
    json_t *layers = json_object_get(ent, "Layers");
    char rel[PATH_MAX];
    if (!cpath || imp_clean_path(cpath, rel, sizeof(rel)) < 0 || !rel[0]) {
        FAIL("manifest.json: invalid Config");
        goto out;
    }
    int64_t size;
    if (imp_file_sha256(layoutfd, rel, p->config, &size) < 0) {
        FAIL("config %s: %s", rel, strerror(errno));
        goto out;
    }
    /* The config is named after its digest (<hex>.json, or blobs/sha256/<hex>). */
    const char *base = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;
    char hex[65];
    snprintf(hex, sizeof(hex), "%.64s", base);
    if (!imp_hex64(hex) || strcmp(hex, p->config + 7) != 0) {
        FAIL("config %s: content hashes to %s", rel, p->config);
        goto out;
    }
    cfg = imp_load_json_at(layoutfd, rel);
    json_t *diff = json_object_get(json_object_get(cfg, "rootfs"), "diff_ids");
    if (!json_is_array(layers) || !json_is_array(diff) || json_array_size(layers) != json_array_size(diff) ||
        json_array_size(layers) > IMP_MAX_LAYERS) {
        FAIL("manifest.json Layers and config rootfs.diff_ids differ (or over %d layers)", IMP_MAX_LAYERS);
        goto out;
    }
    if (plan_command(cfg, p) < 0)
        goto out;
    snprintf(p->format, sizeof(p->format), "docker-archive");
    snprintf(p->digest, sizeof(p->digest), "%s", p->config);
    size_t i;
    json_t *l;
    json_array_foreach(layers, i, l)
    {
        const char *lp = json_string_value(l), *want = json_string_value(json_array_get(diff, i));
        if (!lp || imp_clean_path(lp, rel, sizeof(rel)) < 0 || !rel[0] || !want) {
            FAIL("manifest.json: invalid layer %zu", i);
            goto out;
        }
        char got[72];
        if (imp_file_sha256(layoutfd, rel, got, &size) < 0) {
            FAIL("layer %s: %s", rel, strerror(errno));
            goto out;
        }
        if (strcmp(got, want) != 0) {
            FAIL("layer %s: content hashes to %s, config says %.80s", rel, got, want);
            goto out;
        }
        snprintf(p->layer_digest[p->nlayers], 72, "%s", got);
        if (!(p->layers[p->nlayers] = strdup(rel)))
            goto out;
        p->nlayers++;
    }
    rc = 0;
out:
    json_decref(cfg);
    json_decref(mf);
    return rc;
}
