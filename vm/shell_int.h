/*
** shell_int.h -- the shell's terminal reader (shell.c) and its line editor
** (shell_edit.c, libedit). Called only on the reader's private thread.
*/
#ifndef LPVM_SHELL_INT_H
#define LPVM_SHELL_INT_H

void shell_edit_start(void);       /* settings, history loaded from ~/.lpvm_history */
/* Show `prompt` and edit a new line; `completions` ("a\nb.c\n", malloc'd, owned by
** the editor from here on) are what Tab offers. */
void shell_edit_begin(const char *prompt, char *completions);
/* stdin is readable: feed libedit. 1 when the line is done (*line malloc'd; NULL at
** end of input), 0 when not yet. */
int shell_edit_feed(char **line);
int shell_edit_cancel(void);       /* Ctrl-C: drop the line; 1 if it was empty */
void shell_edit_end(void);         /* the terminal back as it was */

#endif
