from guardrag.cli import main

main()
