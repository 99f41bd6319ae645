/* The chutney program's commands: each takes its own argv (argv[0] is the
 * command name) and returns the process exit status. */
#ifndef CN_TOOLS_H
#define CN_TOOLS_H

#include <chutney.h>

#include <stdbool.h>

int cn_tool_ops(int argc, char **argv);
int cn_tool_train(int argc, char **argv);
int cn_tool_eval(int argc, char **argv);
int cn_tool_run(int argc, char **argv);
int cn_tool_info(int argc, char **argv);
/* `chutney graph MODEL.onnx ...` (tools/onnx_cli.c), called by cn_tool_graph. */
int cn_tool_onnx_graph(int argc, char **argv);
int cn_tool_graph(int argc, char **argv);
/* The benchmark models of docs/benchmarks.md: "mlp", "cnn" or "lstm"
 * (NULL after cn_tool_fail for another name). Input [N, 1, 28, 28] f32. */
cn_module *cn_tool_make_model(const char *name);
bool cn_tool_known_model(const char *name);
/* Loads a checkpoint written by `chutney train --save` into m (made by
 * cn_tool_make_model(model)); with opt, also the optimiser state and the
 * RNG. *epochs_done gets how far that run had got (tools/train.c). */
int cn_tool_load_checkpoint(const char *path, const char *model, cn_module *m, cn_optimizer *opt,
                            int *epochs_done);
int cn_tool_export(int argc, char **argv);

/* Failures of the tools' own making (an unknown model, a checkpoint of
 * another model), reported like the library's: cn_tool_fail sets the
 * message and clears the library's (cn_clear_error), so cn_tool_error()
 * gives the message of the latest failure, the library's if it has one,
 * else the tools' (tools/error.c). */
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
void cn_tool_fail(const char *fmt, ...);
const char *cn_tool_error(void);
int cn_tool_devices(int argc, char **argv);
/* --device S (NULL: the CPU) into *out: 0, or, after a message on stderr
 * starting with prefix ("chutney", "chutney run"), the exit status: 2 when S
 * is not a device name, 1 when this machine has no such device
 * (tools/devices.c). */
int cn_tool_device(const char *prefix, const char *s, cn_device *out);

#endif
