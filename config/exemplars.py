"""Reference sentences the domain classifier measures questions against.

Generic on purpose: they describe what is NOT a help-centre question for any knowledge base
(small talk, trivia, coding, cooking...). The KB itself defines what is in domain.
"""

GREETINGS = (
    "hello", "hi", "hi there", "hey", "good morning", "good afternoon", "good evening",
    "how are you", "how are you doing today", "thanks", "thank you", "thank you so much",
    "ok thanks bye", "bye", "goodbye", "see you", "nice to meet you", "who are you",
    "what is your name", "are you a bot", "are you human", "what can you do", "yo", "hai",
    "selamat pagi", "terima kasih", "apa khabar", "hello there, who are you?", "cheers",
    "good night", "have a nice day", "you are great", "lol", "ok", "cool",
)

OFF_TOPIC = (
    "What is the capital of France?", "Who won the World Cup?", "Who won the football match yesterday?",
    "What is the weather tomorrow?", "Will it rain today?", "How do I bake a chocolate cake?",
    "Give me a recipe for fried rice", "What should I cook for dinner?", "What is a durian?",
    "Tell me a joke", "Write a poem about the sea", "Write a 4-star review for a restaurant",
    "Write an essay about climate change", "Summarise this article for me",
    "Translate this sentence into Hindi", "What does this word mean in French?",
    "How do I build a React dropdown menu?", "Explain Docker vs Kubernetes",
    "How do I kill a Python process?", "Fix this bug in my JavaScript code",
    "How do I reverse a linked list?", "What is machine learning?", "Explain quantum physics",
    "What is the best gym routine for beginners?", "How do I lose weight fast?",
    "What are the symptoms of flu?", "Recommend a good movie to watch", "Who is Taylor Swift?",
    "Who is the prime minister?", "What is the population of China?", "When did World War 2 end?",
    "How far is the moon?", "What is the meaning of life?", "Plan a trip to Japan for me",
    "What is the best smartphone to buy?", "Which laptop should I buy?", "What is bitcoin?",
    "Should I invest in stocks or gold?", "What is the interest rate on a housing loan at my bank?",
    "What is a good savings account?", "How do I apply for a credit card at a bank?",
    "How do I open a bank account?", "What is the stock price of Apple?",
    "How do I play chess?", "Solve this math problem: 12 times 7", "What time is it?",
    "Sing me a song", "What is your favourite colour?", "How do I grow tomatoes?",
    "How do I fix my car engine?", "What is the best pizza topping?", "Tell me about dinosaurs",
    "How do I learn to swim?", "What is the tallest building in the world?",
    "How do I kill weeds in my garden?", "Where can I buy cheap flights?",
    "How do I open a Grab account?", "How do I use PayPal?", "What is Maybank?",
    "How do I train my dog?", "Can you help me with my homework?",
)

#: Well-known other companies and apps: a question about them is not about our KB unless the
#: KB itself mentions them (then they are partners, e.g. a bank you can transfer to).
OTHER_BRANDS = frozenset(
    """maybank cimb rhb ambank hsbc citibank ocbc uob affin alliance bsn agrobank
    grab grabpay boost shopeepay shopee lazada bigpay paypal venmo revolut wise
    alipay wechat gcash paynow paylah setel mae touchngo tng dana ovo gopay
    applepay googlepay samsungpay stripe klarna payoneer skrill binance coinbase
    amazon netflix spotify uber foodpanda airasia""".split()
)
