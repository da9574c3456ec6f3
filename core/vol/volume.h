/* Tenant volumes that outlive sandboxes (docs/volumes.md): the registry of
 * this node's volumes, their attachments (one read-write holder at a time,
 * any number of read-only ones) and the routes /v1/volumes.
 *
 * Local backend: a volume is an ext4 image (sparse file of its size) under
 * <data_dir>/volumes/<id>/disk.img, loop-mounted on the host at
 * <data_dir>/volumes/<id>/tmp while it exists; backends bind that directory
 * into the sandbox (struct eai_iso_volume, ABI 1.5).  Everything here runs
 * on the loop and touches memory only, except the work parked on workers
 * (mkfs, mount, umount, file operations). */
#ifndef EAI_CORE_VOLUME_H
#define EAI_CORE_VOLUME_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include <eai/isolation.h>

struct eai_app;
struct eai_req;

#define EAI_VOL_MAX_MOUNTS 4                 /* volumes per execution or session */
#define EAI_VOL_MIN_BYTES (16LL << 20)       /* ext4 needs some room for itself */
#define EAI_VOL_DEF_MAX_BYTES (10LL << 30)   /* volumes.max_bytes */
#define EAI_VOL_DEF_MAX_COUNT 16             /* volumes.max_per_tenant */
#define EAI_VOL_DEF_MAX_TOTAL (64LL << 30)   /* volumes.max_total_bytes_per_tenant */
#define EAI_VOL_UID 65534                    /* owner of a new volume's root (the sandboxes' default uid) */

/* Load the volumes of this node (<data_dir>/volumes) and mount them;
 * start-up only (before the server listens).  0, or -1 with *err. */
int eai_vols_start(struct eai_app *app, struct eai_error **err);
/* Unmount every volume and free the registry (after the backends closed). */
void eai_vols_stop(struct eai_app *app);

/* A request's "volumes" ([{name, path, read_only}]): checked (at most
 * EAI_VOL_MAX_MOUNTS, paths under /mnt normalised and distinct, each volume
 * once, each the tenant's and ready) and resolved to
 * [{id, name, path, read_only}] in *out (NULL when v is NULL or []).  With
 * check_writer, a read-write mount of a volume someone writes to now is
 * refused (volume_in_use); attach checks it again in any case.
 * pointer: the JSON pointer of v in the body ("/volumes").  0, or -1 with
 * *code and *details (English; NULL when none). */
int eai_vols_resolve(struct eai_app *app, const char *tenant, const json_t *v, const char *pointer,
                     int check_writer, json_t **out, enum eai_code *code, json_t **details);

/* The volumes of one sandbox while it holds them. */
struct eai_vol_att;
/* Take the resolved volumes for holder (an execution or session id):
 * read-write ones exclusively.  NULL with *code and why otherwise
 * (volume_in_use, not_found). */
struct eai_vol_att *eai_vols_attach(struct eai_app *app, const char *tenant, const json_t *resolved,
                                    const char *holder, enum eai_code *code, char *why, size_t whylen);
const struct eai_iso_volume *eai_vol_att_mounts(const struct eai_vol_att *a, size_t *n);
/* Release them (a may be NULL; app may be NULL: this process's). */
void eai_vols_detach(struct eai_app *app, struct eai_vol_att *a);

/* Routes (core/http/routes.c). */
void eai_vol_route_create(struct eai_app *app, struct eai_req *r);
void eai_vol_route_list(struct eai_app *app, struct eai_req *r);
void eai_vol_route_get(struct eai_app *app, struct eai_req *r);
void eai_vol_route_delete(struct eai_app *app, struct eai_req *r);
void eai_vol_route_file_put(struct eai_app *app, struct eai_req *r);
void eai_vol_route_file_get(struct eai_app *app, struct eai_req *r);
void eai_vol_route_file_delete(struct eai_app *app, struct eai_req *r);
void eai_vol_route_file_list(struct eai_app *app, struct eai_req *r);

#endif
