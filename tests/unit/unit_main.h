/* Shared main() of the unit tests: run every registered suite, return
 * non-zero when an assertion failed. */
#ifndef EAI_TESTS_UNIT_MAIN_H
#define EAI_TESTS_UNIT_MAIN_H

#include <CUnit/Basic.h>

#define EAI_UNIT_MAIN(register_fn)                                   \
    int main(void)                                                   \
    {                                                                \
        if (CU_initialize_registry() != CUE_SUCCESS)                 \
            return 2;                                                \
        if (register_fn() != 0) {                                    \
            CU_cleanup_registry();                                   \
            return 2;                                                \
        }                                                            \
        CU_basic_set_mode(CU_BRM_VERBOSE);                           \
        CU_basic_run_tests();                                        \
        unsigned fails = CU_get_number_of_failures();                \
        unsigned run = CU_get_number_of_tests_run();                 \
        CU_cleanup_registry();                                       \
        return (fails || run == 0) ? 1 : 0;                          \
    }

#endif
