/* The chutney command-line program. */
#include <chutney.h>

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: chutney <command> [options]\n"
            "\n"
            "commands:\n"
            "  --version      print the version and the build configuration\n"
            "  --help         print this help\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("chutney %s\n%s\n", cn_version(), cn_build_info());
        return 0;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "chutney: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
