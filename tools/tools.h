/* The chutney program's commands: each takes its own argv (argv[0] is the
 * command name) and returns the process exit status. */
#ifndef CN_TOOLS_H
#define CN_TOOLS_H

#include <chutney.h>

#include <stdbool.h>

int cn_tool_ops(int argc, char **argv);
int cn_tool_train(int argc, char **argv);
int cn_tool_eval(int argc, char **argv);

#endif
