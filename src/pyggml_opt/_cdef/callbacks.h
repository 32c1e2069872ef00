// Python functions that C calls back into (cffi "extern Python"), one per C callback type the
// Python layer installs. Each receives its Python target through the `void *` user-data argument
// (a cffi handle), so one C entry point serves any number of Python objects.

// ggml_log_callback: routes ggml's log lines to the `logging` module.
extern "Python" void pyggml_log_callback(enum ggml_log_level level, const char * text, void * user_data);

// ggml_abort_callback_t: last line of defence before abort(); prints the Python stack.
extern "Python" void pyggml_abort_callback(const char * error_message);

// ggml_opt_get_optimizer_params: called by ggml-opt once per optimizer step; returns the struct by value.
extern "Python" struct ggml_opt_optimizer_params pyggml_get_optimizer_params(void * userdata);
