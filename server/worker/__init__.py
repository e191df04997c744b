"""Workers: the supervisor that claims runs, and the run processes that execute them."""
