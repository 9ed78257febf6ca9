/* SPDX-License-Identifier: MIT */
/*
 * Subcommands of the `rblk` command line. Each takes argv starting at the
 * subcommand name (argv[0] == "nbd", ...) and returns the process exit code.
 */
#ifndef RBLK_INITIATOR_CLI_H
#define RBLK_INITIATOR_CLI_H

#include <stdio.h>

int cmd_info(int argc, char **argv);
int cmd_nbd(int argc, char **argv); /* initiator/nbd_server.c */
int cmd_map(int argc, char **argv); /* initiator/map.c */
int cmd_unmap(int argc, char **argv); /* initiator/map.c */
int cmd_list(int argc, char **argv); /* initiator/map.c */
int cmd_discover(int argc, char **argv); /* initiator/discover.c */
int cmd_version(int argc, char **argv); /* initiator/discover.c */

/* Write s as a JSON string literal (quoted, escaped) to f. */
void cli_json_string(FILE *f, const char *s);

#endif
