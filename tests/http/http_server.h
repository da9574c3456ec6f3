/*
 * The HTTP integration test's fixture (test_http*.c): the real build/eaid
 * on a free loopback port with a temporary data dir, two tenants with a
 * key each, and the suites' setups (http_server.c).
 */
#ifndef EAI_TEST_HTTP_SERVER_H
#define EAI_TEST_HTTP_SERVER_H

#include <sys/types.h>

#include "../unit/unit_main.h"
#include "http_client.h"

extern char eaid[512];
extern char base_url[128];
extern char tmpdir[256];
extern char logfile[400];
extern pid_t server_pid;
extern char key_a[128], key_b[128], tenant_a[64], tenant_b[64];
extern char auth_a[200], auth_b[200];

/* A CUnit assertion with a formatted message (printed when it fails). */
void check_at(int cond, const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
#define CHECK(cond, ...) check_at((cond) ? 1 : 0, __FILE__, __LINE__, __VA_ARGS__)

void url(char *out, size_t n, const char *path);
/* method path on the server: the status, -1 when no answer. */
long req(const char *method, const char *path, const char *const *headers, const char *body, struct th_resp *r);
void chomp(char *s);
int make_tenant_key(const char *name, char tenant[64], char key[128]);
int start_server(const char *config);
int common_setup(void);
int common_teardown(void);
/* 1 when the error envelope r has a detail at path. */
int has_detail_path(const struct th_resp *r, const char *path);
/* A plain TCP connection to the server, or -1. */
int raw_connect(void);

/* The suites' setups: no runtime (EAI_SANDBOX_RUNSC=/nonexistent), on
 * the refusing double (recording), on the holding double (queue), a burst
 * on the refusing double. */
int setup_noruntime(void);
int start_on_double(const char *yaml);
int setup_recording(void);
int setup_queue(void);
int setup_burst(void);

/* Each file's tests, registered into suites by test_http.c. */
int http_reg_noruntime(CU_pSuite s);
int http_reg_recording(CU_pSuite s);
int http_reg_queue(CU_pSuite s);
int http_reg_burst(CU_pSuite s);

#endif
