# The host's library without LibTorch: configuration, plugin loading, data,
# rewards, scoring. Included by core/CMakeLists.txt and by fuzz/CMakeLists.txt
# (the sanitizer build); expects the packages the top-level project finds.
add_library(grpo_core STATIC
  ${CMAKE_CURRENT_LIST_DIR}/config/cli_args.cpp
  ${CMAKE_CURRENT_LIST_DIR}/config/config.cpp
  ${CMAKE_CURRENT_LIST_DIR}/config/flag_table.cpp
  ${CMAKE_CURRENT_LIST_DIR}/config/flag_value.cpp
  ${CMAKE_CURRENT_LIST_DIR}/config/help.cpp
  ${CMAKE_CURRENT_LIST_DIR}/config/log_level.cpp
  ${CMAKE_CURRENT_LIST_DIR}/config/resolve.cpp
  ${CMAKE_CURRENT_LIST_DIR}/config/settings_reader.cpp
  ${CMAKE_CURRENT_LIST_DIR}/config/yaml_source.cpp
  ${CMAKE_CURRENT_LIST_DIR}/config/zero_flags.cpp
  ${CMAKE_CURRENT_LIST_DIR}/data/csv_rows.cpp
  ${CMAKE_CURRENT_LIST_DIR}/data/dataset.cpp
  ${CMAKE_CURRENT_LIST_DIR}/data/json_rows.cpp
  ${CMAKE_CURRENT_LIST_DIR}/data/parquet/column_reader.cpp
  ${CMAKE_CURRENT_LIST_DIR}/data/parquet/page_codecs.cpp
  ${CMAKE_CURRENT_LIST_DIR}/data/parquet/parquet_meta.cpp
  ${CMAKE_CURRENT_LIST_DIR}/data/parquet/parquet_rows.cpp
  ${CMAKE_CURRENT_LIST_DIR}/data/parquet/thrift_compact.cpp
  ${CMAKE_CURRENT_LIST_DIR}/plugins/call_worker.cpp
  ${CMAKE_CURRENT_LIST_DIR}/plugins/conformance.cpp
  ${CMAKE_CURRENT_LIST_DIR}/plugins/conformance_steps.cpp
  ${CMAKE_CURRENT_LIST_DIR}/plugins/crash_guard.cpp
  ${CMAKE_CURRENT_LIST_DIR}/plugins/host_services.cpp
  ${CMAKE_CURRENT_LIST_DIR}/plugins/multiturn_handler.cpp
  ${CMAKE_CURRENT_LIST_DIR}/plugins/plugin_library.cpp
  ${CMAKE_CURRENT_LIST_DIR}/plugins/plugin_options.cpp
  ${CMAKE_CURRENT_LIST_DIR}/plugins/plugin_registry.cpp
  ${CMAKE_CURRENT_LIST_DIR}/plugins/reward_function.cpp
  ${CMAKE_CURRENT_LIST_DIR}/plugins/reward_worker.cpp
  ${CMAKE_CURRENT_LIST_DIR}/plugins/shared_batch.cpp
  ${CMAKE_CURRENT_LIST_DIR}/plugins/wire.cpp
  ${CMAKE_CURRENT_LIST_DIR}/plugins/worker_process.cpp
  ${CMAKE_CURRENT_LIST_DIR}/plugins/sampler_client.cpp
  ${CMAKE_CURRENT_LIST_DIR}/rewards/reward_set.cpp
  ${CMAKE_CURRENT_LIST_DIR}/score/score_command.cpp
  ${CMAKE_CURRENT_LIST_DIR}/score/score_inputs.cpp
  ${CMAKE_CURRENT_LIST_DIR}/util/suggest.cpp)
target_include_directories(grpo_core PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(grpo_core PUBLIC grpo::sdk grpo_tokenizer grpo_hub nlohmann_json::nlohmann_json yaml-cpp spdlog::spdlog
                                       fmt::fmt Boost::headers ${CMAKE_DL_LIBS} Threads::Threads)
# Parquet's codecs, from Debian: snappy, zlib (gzip) and zstd.
pkg_check_modules(PARQUET_CODECS REQUIRED IMPORTED_TARGET snappy zlib libzstd)
target_link_libraries(grpo_core PRIVATE PkgConfig::PARQUET_CODECS)
