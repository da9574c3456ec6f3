/* The gVisor plugin's messages in English and French, by code: the
 * descriptor's message table (ABI 1.4, docs/plugins.md "Messages").  The
 * English is the printf format the plugin formats (GV_MSG), written only
 * here; core puts what reaches a client in French by this table. */
#include "gvisor.h"

const struct eai_message gv_messages[GVS_M_COUNT + 1] = {
    [GVS_M_NO_SESSION] = {"gvisor.session.unknown", "no such session", "pas de telle session"},
    [GVS_M_NOT_RUNNING] = {"gvisor.session.not_running", "the session is not running", "la session ne tourne pas"},
    [GVS_M_BUSY] = {"gvisor.session.busy", "executions are running in the session",
                    "des exécutions tournent dans la session"},
    [GVS_M_NOT_PAUSED] = {"gvisor.session.not_paused", "the session is not paused", "la session n'est pas en pause"},
    [GVS_M_PATH_TMP] = {"gvisor.file.not_tmp", "path must be under /tmp", "le chemin doit être sous /tmp"},
    [GVS_M_FILE_TOO_LARGE] = {"gvisor.file.too_large", "the file is larger than %lld bytes",
                              "le fichier dépasse {1} octets"},
    [GVS_M_DIR_NOT_EMPTY] = {"gvisor.file.dir_not_empty", "the directory is not empty",
                             "le répertoire n'est pas vide"},
    [GVS_M_NO_FILE] = {"gvisor.file.unknown", "no such file", "pas de tel fichier"},
    [GVS_M_TMP_FULL] = {"gvisor.file.tmp_full", "the session's /tmp is full", "le /tmp de la session est plein"},
    [GVS_M_NO_IMAGE] = {"gvisor.session.no_image", "image %s is not in the local image store",
                        "l'image {1} n'est pas dans le magasin d'images local"},
    [GVS_M_BOOT_TIMEOUT] = {"gvisor.session.boot_timeout", "the session's sandbox did not boot in time",
                            "le bac à sable de la session n'a pas démarré à temps"},
    [GVS_M_ENDED_BOOTING] = {"gvisor.session.ended_booting", "the session's sandbox ended while booting",
                             "le bac à sable de la session s'est arrêté pendant son démarrage"},
    [GVS_M_ENDED_OWN] = {"gvisor.session.ended", "the session's sandbox ended on its own",
                         "le bac à sable de la session s'est arrêté de lui-même"},
    [GVS_M_LOST_PAUSING] = {"gvisor.pause.lost", "the sandbox was lost while pausing",
                            "le bac à sable a été perdu pendant la mise en pause"},
    [GVS_M_RESTORE_TIMEOUT] = {"gvisor.resume.timeout", "the restored sandbox did not run in time",
                               "le bac à sable restauré n'a pas tourné à temps"},
    [GVS_M_RESTORE_ENDED] = {"gvisor.resume.ended", "runsc restore ended before the sandbox ran",
                             "runsc restore s'est arrêté avant que le bac à sable tourne"},
    [GVS_M_PAUSE_FAILED] = {"gvisor.pause.failed", "pausing failed", "la mise en pause a échoué"},
    [GVS_M_CHECKPOINT_FAILED] = {"gvisor.pause.checkpoint", "runsc checkpoint failed: %.200s",
                                 "runsc checkpoint a échoué : {1}"},
    [GVS_M_EGRESS_NO_PAUSE] = {"gvisor.pause.egress", "a session with network egress cannot be paused",
                               "une session avec accès réseau sortant ne peut pas être mise en pause"},
    [GVS_M_SNAPSHOT_FAILED] = {"gvisor.snapshot.failed", "the snapshot failed: %.200s",
                               "l'instantané a échoué : {1}"},
    [GVS_M_LOST_SNAPSHOT] = {"gvisor.snapshot.lost", "the sandbox was lost during a snapshot",
                             "le bac à sable a été perdu pendant un instantané"},
    [GVS_M_SNAPSHOT_BAD] = {"gvisor.snapshot.bad", "the snapshot cannot be restored: %.200s",
                            "l'instantané ne peut pas être restauré : {1}"},
    [GVS_M_ENDED_SNAPSHOT] = {"gvisor.snapshot.ended", "the session ended during the snapshot",
                              "la session s'est terminée pendant l'instantané"},
    [GVS_M_SNAPSHOT_OLD_RUNSC] = {"gvisor.snapshot.old_runsc",
                                  "%.100s cannot keep a sandbox running across a checkpoint: snapshots need a runsc"
                                  " of 2024 or later (docs/gvisor.md builds one)",
                                  "{1} ne sait pas garder un bac à sable en marche pendant un point de reprise : les"
                                  " instantanés demandent un runsc de 2024 ou plus récent (docs/gvisor.md en construit"
                                  " un)"},
    [GVS_M_COUNT] = {NULL, NULL, NULL},
};
