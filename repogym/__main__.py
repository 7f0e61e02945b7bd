from repogym.scripts.cli import main

raise SystemExit(main())
