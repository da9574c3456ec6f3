/*
 * HTTP integration test: the real build/eaid over loopback (docs/api.md).
 * Suite "no runtime": default config, EAI_SANDBOX_RUNSC=/nonexistent
 * (test_http_basics.c).  Suite "recording": a profile on the refusing test
 * double (see CMakeLists.txt) so executions are recorded
 * (test_http_recording.c).  Suites "queue" and "burst": the queue bound and
 * 400 submissions from 32 threads on the doubles, none lost
 * (test_http_load.c).  The fixture (eaid, tenants, keys): http_server.c.
 */
#include <curl/curl.h>
#include <signal.h>

#include "http_server.h"

static int reg(void)
{
    if (http_reg_noruntime(CU_add_suite("no runtime", setup_noruntime, common_teardown)) < 0 ||
        http_reg_recording(CU_add_suite("recording", setup_recording, common_teardown)) < 0 ||
        http_reg_queue(CU_add_suite("queue", setup_queue, common_teardown)) < 0 ||
        http_reg_burst(CU_add_suite("burst", setup_burst, common_teardown)) < 0)
        return -1;
    return 0;
}

static int reg_all(void)
{
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return reg();
}

EAI_UNIT_MAIN(reg_all)
