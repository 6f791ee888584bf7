from guardrag.faces.cli.main import main

main()
