/*
 * A static helper that the vendor test puts alone into a tiny image rootfs
 * (no shell, no libc needed in the image):
 *   probe echo WORDS...   prints the words, its uid and hostname; exit 0
 *   probe net IP PORT     tries a TCP connection (2 s); prints "connected"
 *                         and exits 0, or "connect failed: <why>", exit 3
 *   probe sleep S         sleeps S seconds; exit 0
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "echo") == 0) {
        for (int i = 2; i < argc; i++)
            printf("%s%s", argv[i], i + 1 < argc ? " " : "");
        char host[256] = "";
        gethostname(host, sizeof(host) - 1);
        printf("\nuid=%d host=%s\n", (int)getuid(), host);
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "net") == 0) {
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[3]))};
        if (inet_pton(AF_INET, argv[2], &sa.sin_addr) != 1) {
            printf("bad address\n");
            return 2;
        }
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        if (fd < 0) {
            printf("connect failed: socket: %s\n", strerror(errno));
            return 3;
        }
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
            printf("connected\n");
            return 0;
        }
        if (errno != EINPROGRESS) {
            printf("connect failed: %s\n", strerror(errno));
            return 3;
        }
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int e = 0;
        socklen_t l = sizeof(e);
        if (poll(&p, 1, 2000) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &l) == 0 && e == 0) {
            printf("connected\n");
            return 0;
        }
        printf("connect failed: %s\n", e ? strerror(e) : "timeout");
        return 3;
    }
    if (argc == 3 && strcmp(argv[1], "sleep") == 0) {
        sleep((unsigned)atoi(argv[2]));
        return 0;
    }
    fprintf(stderr, "usage: probe echo WORDS... | probe net IP PORT | probe sleep S\n");
    return 2;
}
