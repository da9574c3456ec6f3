/*
 * eai: command-line client of the eai-sandbox API (docs/executions.md, "The
 * eai CLI"); the files are listed in eai.h.
 *
 * EAI_URL (default http://127.0.0.1:8080) and EAI_API_KEY.  Error messages
 * of the server come in the language of --lang, else LC_ALL / LC_MESSAGES /
 * LANG (fr* means French, anything else English), sent as Accept-Language.
 * `eai exec` exits with the program's exit code; 124 on timeout, 137 when
 * the memory limit killed it, 125 with a one-line reason on stderr when the
 * request was refused, the execution was cancelled, the platform could not
 * run it or a --download failed.  The other commands exit 0, 1 on an error
 * (the server's envelope is printed on stderr), 2 on a usage error.
 */
#include <stdlib.h>
#include <string.h>

#include "eai.h"

volatile sig_atomic_t eai_interrupted;

void eai_usage(FILE *f)
{
    fprintf(f,
        "usage: eai [--json] [--lang en|fr] [--url URL] COMMAND ...\n"
        "\n"
        "commands:\n"
        "  exec [options] -- CMD [ARGS...]   run a program in a sandbox, wait, print its output\n"
        "  exec --tool NAME [options]        run an applied tool manifest's own command\n"
        "  get ID                            the execution as JSON\n"
        "  logs ID [-f|--follow]             its stdout (to stdout), then its stderr (to stderr);\n"
        "                                    --follow: as it runs, until it ends\n"
        "  cancel ID                         cancel a queued or running execution\n"
        "  ls [--status S] [--run-id R] [--limit N] [--after CURSOR] [--all]\n"
        "                                    list executions, newest first, a page at a time\n"
        "  files ID                          list its collected files\n"
        "  files ID PATH [-o FILE]           one collected file's bytes to stdout or FILE\n"
        "  files ID --download DIR           every collected file into DIR\n"
        "  session create --image I [--profile P] [--memory M] [--cpu C] [--pids N] [--disk D]\n"
        "          [--env K=V] [--idle-timeout S] [--ttl S] [--max-concurrent N]\n"
        "          [--egress H:P,...] [--auto-pause on|off] [--paused-ttl S] [--volume V:/mnt/P[:ro]]\n"
        "                                    start a session (one sandbox kept across executions);\n"
        "                                    prints its id\n"
        "  session ls [--status S]           this tenant's sessions\n"
        "  session get SID                   the session as JSON\n"
        "  session exec SID [--timeout S] [--env K=V] [--stdin-file F] -- CMD [ARGS...]\n"
        "                                    run in the session, wait, print its output; exits\n"
        "                                    like exec\n"
        "  session put SID LOCAL /tmp/PATH   copy a local file (- for stdin) into the session\n"
        "  session cat SID /tmp/PATH [-o F]  a file of the session to stdout or F\n"
        "  session files SID [/tmp/DIR]      list the session's files\n"
        "  session rm SID /tmp/PATH          delete a file (or an empty directory)\n"
        "  session close SID                 end the session (prints its usage)\n"
        "  session pause SID | resume SID    checkpoint it to disk / bring it back\n"
        "  session snapshot SID [--ttl S]    a snapshot of the running session (it runs on); prints\n"
        "                                    its id (snp_...)\n"
        "  session fork SNP [--count N]      new sessions restored from the snapshot; prints their ids\n"
        "  session snapshots [--session SID] this tenant's snapshots\n"
        "  session unsnap SNP                delete a snapshot\n"
        "  volume create NAME SIZE           a volume that outlives sandboxes (SIZE: bytes or 1Gi);\n"
        "                                    prints its id (docs/volumes.md)\n"
        "  volume ls | get REF | delete REF  the tenant's volumes / one as JSON / delete it\n"
        "  volume put REF LOCAL PATH         copy a local file (- for stdin) into the volume\n"
        "  volume cat REF PATH [-o F]        a file of the volume to stdout or F\n"
        "  volume files REF [DIR] | rm REF PATH   list its files / delete one\n"
        "  mcp                               speak MCP on stdin/stdout, forwarded to EAI_URL/v1/mcp\n"
        "                                    (for agent hosts that launch local MCP servers)\n"
        "  session egress SID [--set H:P,...] its network allow list; --set replaces it\n"
        "                                    (\"\" for none)\n"
        "\n"
        "exec options:\n"
        "  --profile P             sandbox profile (see GET /v1/sandbox/profiles)\n"
        "  --image I               image NAME[:TAG]\n"
        "  --tool NAME             run through an applied tool manifest (its profile, image,\n"
        "                          command and limits; options and a command given here win)\n"
        "  --timeout S             wall-clock limit in seconds\n"
        "  --memory M              memory limit (256Mi, 1Gi, bytes)\n"
        "  --cpu C                 CPU limit (500m, 1, 1.5)\n"
        "  --pids N                process limit\n"
        "  --disk D                size of /tmp (64Mi)\n"
        "  --file LOCAL:/tmp/PATH  copy a local file into the sandbox (repeatable)\n"
        "  --volume NAME:/mnt/PATH[:ro]  mount a volume (repeatable, docs/volumes.md)\n"
        "  --env K=V               environment variable (repeatable)\n"
        "  --egress HOST:PORT      allow a network destination (repeatable; the profile decides)\n"
        "  --stdin-file F          file given to the program's standard input (- for ours)\n"
        "  --collect /tmp/DIR      path whose files are kept after exit (repeatable;\n"
        "                          default /tmp/outputs)\n"
        "  --download DIR          save the collected files into DIR after the run (a file\n"
        "                          /tmp/out/a.txt becomes DIR/out/a.txt; size and sha256 checked)\n"
        "  --project-id, --agent-id, --run-id ID   attribution for FinOps\n"
        "  --idempotency-key K     send an Idempotency-Key header\n"
        "\n"
        "every command:\n"
        "  --json                  machine-readable JSON on stdout (exec: the final record)\n"
        "  --lang en|fr            language of the server's error messages (default: LANG)\n"
        "  --url URL               server (default: EAI_URL, else http://127.0.0.1:8080)\n"
        "\n"
        "environment: EAI_API_KEY (required), EAI_URL, LANG / LC_ALL / LC_MESSAGES\n"
        "exec prints the execution id on stderr first (\"eai: execution sbx_... (queued)\"),\n"
        "then the program's output, and exits with the program's status; 124 timeout;\n"
        "137 out of memory; 125 refused, cancelled, platform error or failed download.\n"
        "Ctrl-C during exec cancels the execution and waits for its end.\n"
        "Other commands exit 0, 1 on an error (the server's message on stderr), 2 on usage.\n");
}

int main(int argc, char **argv)
{
    struct eai_opts o = {0};
    int i = 1;
    /* global options before the command */
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            eai_usage(stdout);
            return 0;
        }
        if (strcmp(a, "--json") == 0) {
            o.json = 1;
        } else if ((strcmp(a, "--lang") == 0 || strcmp(a, "--url") == 0) && i + 1 < argc) {
            if (a[2] == 'l')
                o.lang = argv[++i];
            else
                o.url = argv[++i];
        } else {
            fprintf(stderr, "eai: unknown option %s (see eai --help)\n", a);
            return EAI_EXIT_USAGE;
        }
    }
    if (i >= argc) {
        eai_usage(stderr);
        return EAI_EXIT_USAGE;
    }
    const char *cmd = argv[i];
    static const struct {
        const char *name;
        int (*fn)(const struct eai_opts *, int, char **);
    } cmds[] = {{"exec", eai_cmd_exec}, {"get", eai_cmd_get},   {"logs", eai_cmd_logs},
                {"cancel", eai_cmd_cancel}, {"ls", eai_cmd_ls}, {"files", eai_cmd_files},
                {"session", eai_cmd_session}, {"volume", eai_cmd_volume}, {"mcp", eai_cmd_mcp}};
    if (strcmp(cmd, "help") == 0) {
        eai_usage(stdout);
        return 0;
    }
    for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++) {
        if (strcmp(cmd, cmds[k].name) == 0) {
            curl_global_init(CURL_GLOBAL_DEFAULT);
            int rc = cmds[k].fn(&o, argc - i, argv + i);
            curl_global_cleanup();
            return rc;
        }
    }
    fprintf(stderr, "eai: unknown command '%s' (see eai --help)\n", cmd);
    return EAI_EXIT_USAGE;
}
