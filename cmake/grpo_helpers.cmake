# One helper per folder kind keeps each CMakeLists.txt declarative.

# grpo_plugin(NAME SOURCES... [LIBS ...]): a plugin .so built exactly as third
# parties build theirs: against grpo::sdk, hidden visibility, no undefined symbols.
function(grpo_plugin name)
  cmake_parse_arguments(P "" "" "SOURCES;LIBS" ${ARGN})
  add_library(${name} MODULE ${P_SOURCES})
  target_link_libraries(${name} PRIVATE grpo::sdk ${P_LIBS})
  set_target_properties(${name} PROPERTIES
    PREFIX "libgrpo_"
    C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
    LIBRARY_OUTPUT_DIRECTORY ${GRPO_PLUGIN_OUTPUT_DIR})
  # Export exactly the entry symbol, whatever the linked libraries' headers mark as visible.
  target_link_options(${name} PRIVATE -Wl,-z,defs -Wl,--version-script=${PROJECT_SOURCE_DIR}/cmake/plugin.map)
  install(TARGETS ${name} LIBRARY DESTINATION ${GRPO_PLUGIN_INSTALL_DIR})
  set_property(GLOBAL APPEND PROPERTY GRPO_PLUGIN_TARGETS ${name})
endfunction()

# grpo_test(NAME SOURCES... [LIBS ...] [LABELS ...]): a GoogleTest binary whose
# cases are registered with ctest one by one.
function(grpo_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE GTest::gtest GTest::gtest_main ${T_LIBS})
  target_compile_definitions(${name} PRIVATE
    GRPO_TEST_DATA_DIR="${PROJECT_SOURCE_DIR}/tests/data"
    GRPO_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    GRPO_BINARY_DIR="${PROJECT_BINARY_DIR}")
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests)
  if(NOT T_LABELS)
    set(T_LABELS fast)
  endif()
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS "${T_LABELS}" TIMEOUT 300)
endfunction()
